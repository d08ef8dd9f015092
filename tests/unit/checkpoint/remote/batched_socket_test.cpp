// The socket stream that gathers a push's writes: what it holds back, what
// it sends before a read and at close, and how a lost peer is reported.
#include "remote/batched_socket.hpp"

#include <arpa/inet.h>
#include <git2.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {
namespace {

// A real listening socket on 127.0.0.1 and the connection it accepts.
class Peer {
 public:
  Peer() : listener_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_.get(), 1), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = std::to_string(ntohs(addr.sin_port));
  }
  const char* port() const { return port_.c_str(); }
  void accept() { connection_ = Fd(::accept(listener_.get(), nullptr, nullptr)); }
  void hang_up() { connection_.reset(); }
  bool nothing_arrived() {
    char byte = 0;
    return ::recv(connection_.get(), &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }
  // Exactly `size` bytes, or fewer at end of stream.
  std::string receive(std::size_t size) {
    std::string got(size, '\0');
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::recv(connection_.get(), got.data() + done, size - done, 0);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    got.resize(done);
    return got;
  }
  void send(const std::string& data) {
    ASSERT_EQ(::send(connection_.get(), data.data(), data.size(), 0),
              static_cast<ssize_t>(data.size()));
  }

 private:
  Fd listener_;
  Fd connection_;
  std::string port_;
};

class BatchedSocketTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (stream_ != nullptr) stream_->free(stream_);
  }
  git_stream* connect_to(const char* port) {
    EXPECT_EQ(open_batched_socket(&stream_, "127.0.0.1", port), 0);
    return stream_;
  }
  ssize_t write(const std::string& data) {
    return stream_->write(stream_, data.data(), data.size(), 0);
  }

  GitLibrary library_;
  git_stream* stream_ = nullptr;
};

TEST_F(BatchedSocketTest, HoldsSmallWritesUntilARead) {
  Peer peer;
  git_stream* stream = connect_to(peer.port());
  ASSERT_EQ(stream->connect(stream), 0);
  peer.accept();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(write("0123456789"), 10);
  EXPECT_TRUE(peer.nothing_arrived());

  peer.send("answer");
  char buffer[16] = {};
  ASSERT_EQ(stream->read(stream, buffer, sizeof buffer), 6);
  EXPECT_EQ(std::string(buffer, 6), "answer");
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += "0123456789";
  EXPECT_EQ(peer.receive(expected.size()), expected);
}

TEST_F(BatchedSocketTest, SendsOnceItHolds64KiBAndTheRestAtClose) {
  Peer peer;
  git_stream* stream = connect_to(peer.port());
  ASSERT_EQ(stream->connect(stream), 0);
  peer.accept();
  const std::string big(70'000, 'x');
  ASSERT_EQ(write(big), 70'000);
  EXPECT_EQ(peer.receive(big.size()), big);
  ASSERT_EQ(write("tail"), 4);
  EXPECT_TRUE(peer.nothing_arrived());
  ASSERT_EQ(stream->close(stream), 0);
  EXPECT_EQ(peer.receive(100), "tail");  // then end of stream
}

TEST_F(BatchedSocketTest, APeerThatHungUpIsANetworkErrorNotASignal) {
  Peer peer;
  git_stream* stream = connect_to(peer.port());
  ASSERT_EQ(stream->connect(stream), 0);
  peer.accept();
  peer.hang_up();
  // The first send may still be taken by the kernel; the reset ends it.
  ssize_t result = 0;
  for (int i = 0; i < 100 && result >= 0; ++i) result = write(std::string(70'000, 'x'));
  ASSERT_LT(result, 0);
  ASSERT_NE(git_error_last(), nullptr);
  EXPECT_EQ(git_error_last()->klass, GIT_ERROR_NET);
}

TEST_F(BatchedSocketTest, ARefusedConnectionNamesTheHost) {
  std::string port;
  {
    Peer closed;  // a port that was just free, and is closed again
    port = closed.port();
  }
  git_stream* stream = connect_to(port.c_str());
  ASSERT_LT(stream->connect(stream), 0);
  EXPECT_NE(std::string(git_error_last()->message).find("failed to connect to 127.0.0.1"),
            std::string::npos)
      << git_error_last()->message;
}

}  // namespace
}  // namespace inflight::checkpoint
