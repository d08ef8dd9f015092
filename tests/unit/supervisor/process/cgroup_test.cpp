#include "inflight/supervisor/process/cgroup.hpp"

#include <gtest/gtest.h>

namespace inflight {
namespace {

// A hybrid host: v1 hierarchies beside cgroup2 at /sys/fs/cgroup/unified.
constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridCgroup =
    "9:name=systemd:/\n"
    "4:memory:/process_api/5ff10c40\n"
    "1:cpu:/\n"
    "0::/\n";

// A pure v2 host under systemd, with optional fields before the separator.
constexpr const char* kUnifiedMountinfo =
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";
constexpr const char* kUnifiedCgroup = "0::/system.slice/inflight.service\n";

TEST(Cgroup2Mount, FoundBesideV1Hierarchies) {
  const auto mount = parse_cgroup2_mount(kHybridMountinfo);
  ASSERT_TRUE(mount);
  EXPECT_EQ(mount->mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mount->root, "/");
}

TEST(Cgroup2Mount, FoundAfterOptionalFields) {
  const auto mount = parse_cgroup2_mount(kUnifiedMountinfo);
  ASSERT_TRUE(mount);
  EXPECT_EQ(mount->mount_point, "/sys/fs/cgroup");
}

TEST(Cgroup2Mount, AbsentOnAV1OnlyHost) {
  EXPECT_FALSE(parse_cgroup2_mount(
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"));
  EXPECT_FALSE(parse_cgroup2_mount(""));
}

TEST(Cgroup2Mount, UnescapesAMountPointWithASpace) {
  const auto mount = parse_cgroup2_mount("41 31 0:38 / /mnt/cg\\0402 rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(mount);
  EXPECT_EQ(mount->mount_point, "/mnt/cg 2");
}

TEST(V2CgroupPath, ReadsTheZeroLineOnly) {
  EXPECT_EQ(parse_v2_cgroup_path(kHybridCgroup), "/");
  EXPECT_EQ(parse_v2_cgroup_path(kUnifiedCgroup), "/system.slice/inflight.service");
  EXPECT_FALSE(parse_v2_cgroup_path("4:memory:/x\n1:cpu:/\n"));
}

TEST(CgroupDir, JoinsThePathUnderTheMount) {
  const auto hybrid = *parse_cgroup2_mount(kHybridMountinfo);
  EXPECT_EQ(cgroup_dir(hybrid, "/"), "/sys/fs/cgroup/unified");
  const auto unified = *parse_cgroup2_mount(kUnifiedMountinfo);
  EXPECT_EQ(cgroup_dir(unified, "/system.slice/inflight.service"),
            "/sys/fs/cgroup/system.slice/inflight.service");
}

// A mount of part of the hierarchy (a container's bind mount) shows only what is below its root.
TEST(CgroupDir, StripsTheMountRootAndRefusesWhatIsOutsideIt) {
  const Cgroup2Mount partial{"/kubepods/pod1", "/sys/fs/cgroup"};
  EXPECT_EQ(cgroup_dir(partial, "/kubepods/pod1/ctr"), "/sys/fs/cgroup/ctr");
  EXPECT_EQ(cgroup_dir(partial, "/kubepods/pod1"), "/sys/fs/cgroup");
  EXPECT_FALSE(cgroup_dir(partial, "/kubepods/pod2"));
  EXPECT_FALSE(cgroup_dir(partial, "/"));
}

}  // namespace
}  // namespace inflight
