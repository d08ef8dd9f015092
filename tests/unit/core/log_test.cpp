// The log's batch: lines held until a flush, a warning written at once with
// what came before it, and pieces that a pipe keeps whole. stderr is a
// datagram socket here, so that each write(2) arrives as one datagram.
#include "inflight/core/log.hpp"

#include <gtest/gtest.h>
#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace inflight::log {
namespace {

class LogBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sockets_), 0);
    saved_stderr_ = ::dup(STDERR_FILENO);
    ::dup2(sockets_[0], STDERR_FILENO);
    set_format(Format::json);
  }
  void TearDown() override {
    ::dup2(saved_stderr_, STDERR_FILENO);
    ::close(saved_stderr_);
    ::close(sockets_[0]);
    ::close(sockets_[1]);
  }

  // Each write(2) to stderr so far, in order.
  std::vector<std::string> writes() {
    std::vector<std::string> out;
    char buffer[65536];
    for (ssize_t n; (n = ::recv(sockets_[1], buffer, sizeof buffer, 0)) > 0;)
      out.emplace_back(buffer, static_cast<std::size_t>(n));
    return out;
  }

  int sockets_[2]{};
  int saved_stderr_ = -1;
};

TEST_F(LogBatchTest, InfoLinesWaitForTheFlushAndGoOutInOneWrite) {
  int scheduled = 0;
  {
    const Batch batch([&] { ++scheduled; });
    info("first");
    info("second");
    EXPECT_TRUE(writes().empty());
    EXPECT_EQ(scheduled, 1);
    flush();
    const auto out = writes();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out[0].find("first"), std::string::npos);
    EXPECT_LT(out[0].find("first"), out[0].find("second"));
    info("third");
    EXPECT_EQ(scheduled, 2);
  }
  const auto out = writes();  // the batch's end flushed it
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].find("third"), std::string::npos);
  info("unbatched");
  EXPECT_EQ(writes().size(), 1u);
}

TEST_F(LogBatchTest, AWarningGoesOutAtOnceAfterTheLinesBeforeIt) {
  const Batch batch([] {});
  info("before");
  warn("trouble");
  const auto out = writes();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LT(out[0].find("before"), out[0].find("trouble"));
}

TEST_F(LogBatchTest, ABigBatchIsWrittenInWholeLinesOfAtMostPipeBuf) {
  const Batch batch([] {});
  const std::string filler(300, 'x');
  for (int i = 0; i < 40; ++i) info(filler);
  flush();
  const auto out = writes();
  ASSERT_GT(out.size(), 1u);
  std::size_t lines = 0;
  for (const auto& piece : out) {
    EXPECT_LE(piece.size(), static_cast<std::size_t>(PIPE_BUF));
    EXPECT_EQ(piece.back(), '\n');
    for (const char c : piece) lines += c == '\n';
  }
  EXPECT_EQ(lines, 40u);
}

TEST_F(LogBatchTest, ALineLongerThanPipeBufGoesAloneWithItsNewline) {
  const Batch batch([] {});
  info("short");
  info(std::string(2 * PIPE_BUF, 'y'));
  info("after");
  flush();
  const auto out = writes();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(out[0].find("short"), std::string::npos);
  EXPECT_GT(out[1].size(), static_cast<std::size_t>(2 * PIPE_BUF));
  EXPECT_EQ(out[1].back(), '\n');
  EXPECT_EQ(out[1].find('\n'), out[1].size() - 1);
  EXPECT_NE(out[2].find("after"), std::string::npos);
}

// The line's form as it was first built (an ordered json of time, level, msg and the fields,
// dumped): the fields in their order, a field named like the head replacing it in place, bytes
// that are not UTF-8 as U+FFFD. Log readers parse this form.
TEST_F(LogBatchTest, AJsonLineKeepsItsFormByteForByte) {
  const nlohmann::json fields{{"run_id", "r\"1\n"},
                              {"msg", "replaced"},
                              {"n", 18446744073709551615u},
                              {"bad", "\xff\xfe"},
                              {"obj", {{"b", 1}, {"a", nullptr}}},
                              {"list", {1.5, true, "x"}}};
  warn("original \x80", fields);
  const auto out = writes();
  ASSERT_EQ(out.size(), 1u);
  nlohmann::ordered_json expected = nlohmann::ordered_json::parse(out[0]);
  ASSERT_TRUE(expected["time"].is_string());
  nlohmann::ordered_json old{
      {"time", expected["time"]}, {"level", "warn"}, {"msg", "original \x80"}};
  for (const auto& [key, value] : fields.items()) old[key] = value;
  EXPECT_EQ(out[0], old.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  EXPECT_EQ(expected["msg"], "replaced");
}

// A model call's lines are written from Fields, every other line from json: both give the same
// line, in either format, a field named like the head included (a json object's fields come in
// the order of their names, which a caller of Fields keeps).
TEST_F(LogBatchTest, FieldsGiveTheLineJsonGives) {
  const auto without_time = [](std::string line) {
    const auto start = line.starts_with("{") ? line.find(':') + 1 : 0;
    return line.erase(start, line.find(line.starts_with("{") ? ',' : ' ') - start);
  };
  for (const auto format : {Format::json, Format::text}) {
    set_format(format);
    warn("model call ended", {{"run_id", "r\"1\n\xff"},
                              {"status", 200u},
                              {"tokens", "unknown"},
                              {"level", "replaced"},
                              {"ms", 18446744073709551615u}});
    write_fields(Level::warn, "model call ended",
                 {{"level", "replaced"},
                  {"ms", std::uint64_t{18446744073709551615u}},
                  {"run_id", "r\"1\n\xff"},
                  {"status", std::uint64_t{200}},
                  {"tokens", "unknown"}});
    const auto out = writes();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(without_time(out[1]), without_time(out[0]));
    EXPECT_NE(out[0].find("18446744073709551615"), std::string::npos) << out[0];
  }
}

}  // namespace
}  // namespace inflight::log
