#include "inflight/checkpoint/ssh_trust.hpp"

#include <sstream>

#include "checkpoint/checkpoint_test_support.hpp"

namespace inflight::checkpoint::testing {
namespace {

// The raw key blob of an OpenSSH public key line ("type base64 comment").
std::string key_blob(const std::string& public_line) {
  std::istringstream fields(public_line);
  std::string type, base64;
  fields >> type >> base64;
  return run("printf '%s' '" + base64 + "' | base64 -d");
}

class SshTrustTest : public ::testing::Test {
 protected:
  std::string make_key(const std::string& name, const std::string& args) {
    const fs::path key = temp_.path() / name;
    run("ssh-keygen -q -N '' " + args + " -f '" + key.string() + "' >/dev/null");
    return key.string();
  }
  std::string public_line(const std::string& key) { return trimmed(read_file(key + ".pub")); }
  fs::path known_hosts(const std::string& content) {
    const fs::path path = temp_.path() / "known_hosts";
    write_file(path, content);
    return path;
  }

  TempDir temp_;
};

TEST_F(SshTrustTest, PlainPortAndWildcardEntries) {
  const std::string server = public_line(make_key("server", "-t ed25519"));
  const std::string other = public_line(make_key("other", "-t ed25519"));
  const fs::path file =
      known_hosts("# comment\n\ngit.example.com,10.0.0.1 " + server + "\n[git.example.com]:2222 " +
                  other + "\n*.corp " + server + "\n");
  const std::string blob = key_blob(server);
  EXPECT_EQ(check_known_host(file, "git.example.com", 22, blob), HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "GIT.example.com", 0, blob), HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "10.0.0.1", 22, blob), HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "build.corp", 22, blob), HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "git.example.com", 2222, blob), HostKeyVerdict::mismatch);
  EXPECT_EQ(check_known_host(file, "git.example.com", 2222, key_blob(other)),
            HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "elsewhere.org", 22, blob), HostKeyVerdict::unknown_host);
}

TEST_F(SshTrustTest, NegatedPatternsAndRevokedKeys) {
  const std::string server = public_line(make_key("server", "-t ed25519"));
  const fs::path file =
      known_hosts("*.corp,!evil.corp " + server + "\n@revoked * " + server + "\n");
  EXPECT_EQ(check_known_host(file, "evil.corp", 22, key_blob(server)), HostKeyVerdict::revoked);
  const fs::path not_revoked = known_hosts("*.corp,!evil.corp " + server + "\n");
  EXPECT_EQ(check_known_host(not_revoked, "evil.corp", 22, key_blob(server)),
            HostKeyVerdict::unknown_host);
}

TEST_F(SshTrustTest, HashedEntries) {
  const std::string server = public_line(make_key("server", "-t ecdsa"));
  const fs::path file =
      known_hosts("git.example.com " + server + "\n[10.1.1.1]:2200 " + server + "\n");
  run("ssh-keygen -q -H -f '" + file.string() + "' >/dev/null 2>&1");
  ASSERT_EQ(read_file(file).find("git.example.com"), std::string::npos);
  EXPECT_EQ(check_known_host(file, "git.example.com", 22, key_blob(server)),
            HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "10.1.1.1", 2200, key_blob(server)), HostKeyVerdict::trusted);
  EXPECT_EQ(check_known_host(file, "other.example.com", 22, key_blob(server)),
            HostKeyVerdict::unknown_host);
}

TEST_F(SshTrustTest, RsaKeysAreExplained) {
  const auto openssh_rsa = rsa_key_limitation(make_key("rsa", "-t rsa -b 2048"));
  ASSERT_TRUE(openssh_rsa);
  EXPECT_NE(openssh_rsa->find("libssh2 1.10"), std::string::npos);
  EXPECT_NE(openssh_rsa->find("ed25519 and ecdsa"), std::string::npos);
  EXPECT_TRUE(rsa_key_limitation(make_key("rsa-pem", "-t rsa -b 2048 -m PEM")));
  EXPECT_FALSE(rsa_key_limitation(make_key("ed", "-t ed25519")));
  EXPECT_FALSE(rsa_key_limitation(make_key("ec", "-t ecdsa")));
  EXPECT_FALSE(rsa_key_limitation(temp_.path() / "missing"));
}

}  // namespace
}  // namespace inflight::checkpoint::testing
