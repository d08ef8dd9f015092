// Against a real sshd on loopback. sshd needs its privilege separation
// directory; where the system has none the tests are skipped.
#include <sstream>

#include "checkpoint/background_process.hpp"
#include "checkpoint/checkpoint_test_support.hpp"

namespace inflight::checkpoint::testing {
namespace {

const std::string kSshRef = "refs/heads/inflight/pod-a/r-1";

class SshRemoteTest : public CheckpointTest {
 protected:
  void SetUp() override {
    if (!fs::exists("/run/sshd") || !fs::exists("/usr/sbin/sshd")) GTEST_SKIP() << "no sshd";
    for (const char* key : {"host", "client", "rsa"}) {
      const std::string type = std::string(key) == "rsa" ? "rsa -b 2048" : "ed25519";
      run("ssh-keygen -q -N '' -t " + type + " -f '" + path(key).string() + "'");
    }
    write_file(path("authorized_keys"), read_file(path("client.pub")) + read_file(path("rsa.pub")));
    write_file(path("sshd_config"), "ListenAddress 127.0.0.1\nPort " + std::to_string(port_) +
                                        "\nHostKey " + path("host").string() +
                                        "\nAuthorizedKeysFile " + path("authorized_keys").string() +
                                        "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                                        "PermitRootLogin yes\nPidFile none\n");
    sshd_.emplace(std::vector<std::string>{"/usr/sbin/sshd", "-D", "-f", path("sshd_config")},
                  port_);
    run("git init -q --bare '" + path("results.git").string() + "'");
    repo_.emplace(cache_path());
  }
  fs::path path(const std::string& name) const { return temp_.path() / name; }
  RemoteConfig config(const std::string& key, const fs::path& known_hosts = {}) const {
    return RemoteConfig{
        "ssh://root@127.0.0.1:" + std::to_string(port_) + path("results.git").string(),
        "",
        "",
        path(key),
        known_hosts,
        {}};
  }
  std::string commit() {
    write_file(run_dir() / "a.txt", "a");
    return *RunSnapshotter(*repo_, {})
                .snapshot(run_dir(), CheckpointInfo{"r-1", 1, CheckpointReason::manual, "p", 0},
                          std::nullopt);
  }
  fs::path known_hosts(const std::string& public_key_file) {
    std::istringstream fields(read_file(path(public_key_file)));
    std::string type, key;
    fields >> type >> key;
    write_file(path("known_hosts"),
               "[127.0.0.1]:" + std::to_string(port_) + " " + type + " " + key + "\n");
    return path("known_hosts");
  }

  int port_ = free_port();
  std::optional<BackgroundProcess> sshd_;
  std::optional<CacheRepo> repo_;
};

GitError error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const GitError& error) {
    return error;
  }
  ADD_FAILURE() << "expected a GitError";
  return GitError(Failure::other, "none");
}

TEST_F(SshRemoteTest, Ed25519KeyPushesWhenTheHostKeyIsKnown) {
  RemoteStore store(*repo_, config("client", known_hosts("host.pub")));
  const std::string oid = commit();
  store.push(kSshRef, oid);
  ASSERT_EQ(store.list().size(), 1u);
  EXPECT_EQ(store.list()[0].oid, oid);
}

TEST_F(SshRemoteTest, WrongHostKeyIsRefusedNamingTheHost) {
  RemoteStore store(*repo_, config("client", known_hosts("client.pub")));
  const GitError error = error_of([&] { store.list(); });
  EXPECT_EQ(error.kind(), Failure::unreachable);
  EXPECT_NE(std::string(error.what()).find("127.0.0.1"), std::string::npos) << error.what();
}

TEST_F(SshRemoteTest, RsaKeyFailsAsAuthWithTheExplanation) {
  RemoteStore store(*repo_, config("rsa"));
  const GitError error = error_of([&] { store.list(); });
  EXPECT_EQ(error.kind(), Failure::auth) << error.what();
  EXPECT_NE(std::string(error.what()).find("libssh2 1.10"), std::string::npos) << error.what();
}

}  // namespace
}  // namespace inflight::checkpoint::testing
