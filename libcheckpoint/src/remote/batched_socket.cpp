#include "remote/batched_socket.hpp"

#include <git2.h>
#include <git2/sys/stream.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "git/git_error.hpp"
#include "inflight/core/fd.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::size_t kSendSize = 64 * 1024;

class BatchedSocket {
 public:
  static int open(git_stream** out, const char* host, const char* port);

 private:
  // What libgit2 holds: a C struct that leads with its git_stream.
  struct Shell {
    git_stream stream;
    BatchedSocket* self;
  };

  BatchedSocket(const char* host, const char* port) : host_(host), port_(port) {}
  static BatchedSocket& of(git_stream* stream) { return *reinterpret_cast<Shell*>(stream)->self; }

  int connect();
  int send_pending();
  ssize_t read(void* data, std::size_t size);
  ssize_t write(const char* data, std::size_t size);
  int close();

  Shell shell_{};
  std::string host_;
  std::string port_;
  Fd socket_;
  std::string pending_;
};

int fail(const std::string& message) {
  git_error_set_str(GIT_ERROR_NET, message.c_str());
  return -1;
}

int BatchedSocket::connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host_.c_str(), port_.c_str(), &hints, &found); rc != 0)
    return fail("failed to resolve address for " + host_ + ": " + ::gai_strerror(rc));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
  int error = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd && ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      // Writes are gathered here: Nagle's wait for an ACK would only hold
      // back the last, short send, for up to the peer's 40 ms delayed ACK.
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      socket_ = std::move(fd);
      return 0;
    }
    error = errno;
  }
  return fail("failed to connect to " + host_ + ": " + std::strerror(error));
}

// MSG_NOSIGNAL: a peer that hung up is an error to report, not a SIGPIPE.
int BatchedSocket::send_pending() {
  std::size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n =
        ::send(socket_.get(), pending_.data() + done, pending_.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::string("could not send to ") + host_ + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  pending_.clear();
  return 0;
}

ssize_t BatchedSocket::read(void* data, std::size_t size) {
  if (send_pending() < 0) return -1;
  for (;;) {
    const ssize_t n = ::recv(socket_.get(), data, size, 0);
    if (n >= 0) return n;
    if (errno != EINTR)
      return fail(std::string("could not read from ") + host_ + ": " + std::strerror(errno));
  }
}

ssize_t BatchedSocket::write(const char* data, std::size_t size) {
  pending_.append(data, size);
  if (pending_.size() >= kSendSize && send_pending() < 0) return -1;
  return static_cast<ssize_t>(size);
}

int BatchedSocket::close() {
  const int rc = socket_ ? send_pending() : 0;
  socket_.reset();
  return rc;
}

int BatchedSocket::open(git_stream** out, const char* host, const char* port) {
  auto* socket = new BatchedSocket(host, port);
  socket->shell_ = {.stream = {.version = GIT_STREAM_VERSION,
                               .encrypted = 0,
                               .proxy_support = 0,
                               .connect = [](git_stream* s) { return of(s).connect(); },
                               .certificate = nullptr,
                               .set_proxy = nullptr,
                               .read = [](git_stream* s, void* data,
                                          size_t size) { return of(s).read(data, size); },
                               .write = [](git_stream* s, const char* data, size_t size,
                                           int) { return of(s).write(data, size); },
                               .close = [](git_stream* s) { return of(s).close(); },
                               .free = [](git_stream* s) { delete &of(s); }},
                    .self = socket};
  *out = &socket->shell_.stream;
  return 0;
}

}  // namespace

int open_batched_socket(git_stream** out, const char* host, const char* port) {
  return BatchedSocket::open(out, host, port);
}

void use_batched_sockets(bool on) {
  git_stream_registration batched = {
      .version = GIT_STREAM_VERSION, .init = &open_batched_socket, .wrap = nullptr};
  // libgit2 copies the registration; null restores its own stream.
  git_check(git_stream_register(GIT_STREAM_STANDARD, on ? &batched : nullptr),
            "choose the socket stream");
}

}  // namespace inflight::checkpoint
