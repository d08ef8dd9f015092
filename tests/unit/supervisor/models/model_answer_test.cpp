// The answer watcher on bodies shaped as the three providers send them: whether each ended as it
// should, the usage it reports, and the same verdict however the bytes are cut into pieces.
#include "inflight/supervisor/models/model_answer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace inflight::models {
namespace {

const std::string kChatStream =
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",)"
    R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],)"
    R"("usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",)"
    R"("choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",)"
    R"("choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",)"
    R"("choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})"
    "\n\n"
    "data: [DONE]\n\n";

std::string responses_stream(const std::string& last) {
  return "event: response.created\n"
         R"(data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1",)"
         R"("status":"in_progress","usage":null}})"
         "\n\n"
         "event: response.output_text.delta\n"
         R"(data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1",)"
         R"("output_index":0,"content_index":0,"delta":"Hi"})"
         "\n\n"
         "event: " +
         last + "\n" + R"(data: {"type":")" + last +
         R"(","sequence_number":2,"response":{"id":"resp_1","status":"done","usage":)"
         R"({"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":7,)"
         R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":37}}})"
         "\n\n";
}

const std::string kAnthropicStart =
    "event: message_start\n"
    R"(data: {"type":"message_start","message":{"id":"msg_1","type":"message",)"
    R"("role":"assistant","content":[],"model":"claude-sonnet-4","stop_reason":null,)"
    R"("usage":{"input_tokens":25,"cache_creation_input_tokens":100,)"
    R"("cache_read_input_tokens":2000,"output_tokens":1}}})"
    "\n\n"
    "event: content_block_start\n"
    R"(data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"
    "\n\n"
    "event: ping\n"
    R"(data: {"type": "ping"})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}})"
    "\n\n";

const std::string kAnthropicEnd =
    "event: content_block_stop\n"
    R"(data: {"type":"content_block_stop","index":0})"
    "\n\n"
    "event: message_delta\n"
    R"(data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
    R"("usage":{"output_tokens":15}})"
    "\n\n"
    "event: message_stop\n"
    R"(data: {"type":"message_stop"})"
    "\n\n";

const std::string kAnthropicStream = kAnthropicStart + kAnthropicEnd;

struct Watched {
  AnswerEnd end;
  Usage usage;
};

// What a watcher makes of `body` fed in pieces of `piece` bytes.
Watched watched(bool stream, std::string_view body, std::size_t piece = SIZE_MAX) {
  AnswerWatcher watcher(stream);
  for (std::size_t at = 0; at < body.size(); at += piece) watcher.feed(body.substr(at, piece));
  const auto end = watcher.finish();
  return {end, watcher.usage()};
}

Usage tokens(std::uint64_t input, std::uint64_t output) {
  return {input, output};
}

std::string with_crlf(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return out;
}

// ---------------------------------------------------------------- streams

TEST(AnswerWatcher, ChatStreamWithItsUsageChunkAndDoneIsComplete) {
  const auto seen = watched(true, kChatStream);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(12, 5));
}

// An event is parsed only when a quote is followed by a word we read; quotes are found 16 bytes
// at a time, so the word is tried at every place of a block, and at the data's end.
TEST(AnswerWatcher, FindsTheUsageKeyAtEveryPlaceOfABlock) {
  for (std::size_t pad = 0; pad < 40; ++pad) {
    const auto usage_chunk = "data: {\"pad\":\"" + std::string(pad, 'x') +
                             R"(","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}})";
    const auto seen = watched(true, usage_chunk + "\n\ndata: [DONE]\n\n");
    EXPECT_EQ(seen.usage, tokens(3, 4)) << "pad " << pad;
    // A quote as the data's last byte, at every place of a block: no word follows it, nothing
    // is parsed (ASan, in the sanitized build, sees any read past the block).
    const auto unfinished = watched(true, "data: " + std::string(pad, 'x') + "\"\n\n");
    EXPECT_EQ(unfinished.usage, Usage{}) << "pad " << pad;
  }
}

TEST(AnswerWatcher, ChatStreamWithoutUsageLeavesItUnknown) {
  const auto cut = kChatStream.find(
      "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion"
      ".chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[]");
  ASSERT_NE(cut, std::string::npos);
  const auto seen = watched(true, kChatStream.substr(0, cut) + "data: [DONE]\n\n");
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, Usage{});
}

TEST(AnswerWatcher, ResponsesStreamEndsWithCompletedOrIncomplete) {
  for (const std::string last : {"response.completed", "response.incomplete"}) {
    const auto seen = watched(true, responses_stream(last));
    EXPECT_EQ(seen.end, AnswerEnd::complete) << last;
    EXPECT_EQ(seen.usage, tokens(30, 7)) << last;
  }
}

TEST(AnswerWatcher, AnthropicStreamCountsCacheTokensAsInput) {
  const auto seen = watched(true, kAnthropicStream);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(25 + 100 + 2000, 15));
}

TEST(AnswerWatcher, MessageDeltaInputReplacesMessageStarts) {
  const std::string delta =
      "event: message_delta\n"
      R"(data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":)"
      R"({"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,)"
      R"("output_tokens":20}})"
      "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const auto seen = watched(true, kAnthropicStart + delta);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(50, 20));
}

TEST(AnswerWatcher, AnErrorEventIsAnError) {
  const std::string anthropic_error =
      "event: error\n"
      R"(data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"
      "\n\n";
  EXPECT_EQ(watched(true, kAnthropicStart + anthropic_error).end, AnswerEnd::error);
  // The terminal event after it does not undo it.
  EXPECT_EQ(watched(true, kAnthropicStart + anthropic_error + kAnthropicEnd).end, AnswerEnd::error);
  // An error only the data's type names.
  EXPECT_EQ(watched(true, "data: {\"type\":\"error\",\"error\":{}}\n\ndata: [DONE]\n\n").end,
            AnswerEnd::error);
  EXPECT_EQ(watched(true, "event: error\ndata: [DONE]\n\n").end, AnswerEnd::error);
  EXPECT_EQ(watched(true, responses_stream("response.failed")).end, AnswerEnd::error);
}

TEST(AnswerWatcher, AStreamWithoutItsTerminalEventIsAnError) {
  const auto done = kChatStream.find("data: [DONE]");
  EXPECT_EQ(watched(true, kChatStream.substr(0, done)).end, AnswerEnd::error);
  EXPECT_EQ(watched(true, kChatStream.substr(0, done + 9)).end, AnswerEnd::error);
  // The [DONE] line came, its blank line did not: an SSE client never saw the event.
  EXPECT_EQ(watched(true, kChatStream.substr(0, kChatStream.size() - 1)).end, AnswerEnd::error);
  EXPECT_EQ(watched(true, kAnthropicStart).end, AnswerEnd::error);
  EXPECT_EQ(watched(true, "").end, AnswerEnd::error);
  // A "message_stop" in a text delta is not the event.
  EXPECT_EQ(
      watched(true, kAnthropicStart +
                        R"(data: {"type":"content_block_delta","delta":{"text":"message_stop"}})"
                        "\n\n")
          .end,
      AnswerEnd::error);
}

TEST(AnswerWatcher, GivesTheSameVerdictHoweverTheBytesAreCut) {
  const std::vector<std::string> bodies{kChatStream,
                                        responses_stream("response.completed"),
                                        kAnthropicStream,
                                        kAnthropicStart,
                                        with_crlf(kAnthropicStream),
                                        with_crlf(kChatStream)};
  for (const auto& body : bodies) {
    const auto whole = watched(true, body);
    for (std::size_t piece : {1, 2, 3, 7, 64, 1000}) {
      const auto cut = watched(true, body, piece);
      EXPECT_EQ(cut.end, whole.end) << "pieces of " << piece;
      EXPECT_EQ(cut.usage, whole.usage) << "pieces of " << piece;
    }
  }
}

TEST(AnswerWatcher, ReadsCrLfLineEnds) {
  auto seen = watched(true, with_crlf(kAnthropicStream));
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(2125, 15));
  seen = watched(true, with_crlf(kChatStream), 1);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(12, 5));
}

TEST(AnswerWatcher, JoinsDataLinesAndSkipsComments) {
  const std::string body =
      ": keep-alive\n\n"
      "data: {\"choices\":[],\n"
      ": a comment between the lines\n"
      "data: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n"
      "id: 7\n\n"
      ":\n\n"
      "data:[DONE]\n\n";
  const auto seen = watched(true, body, 5);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(3, 4));
}

TEST(AnswerWatcher, SkipsALineLongerThanTheLimit) {
  const std::string long_text(kMaxEventLineBytes + 10, 'x');
  const std::string long_event =
      "data: {\"choices\":[{\"delta\":{\"content\":\"" + long_text +
      "\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n";
  // The long event's usage is lost, the events around it are read.
  auto seen = watched(true, kChatStream + long_event + "data: [DONE]\n\n", 4096);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, tokens(12, 5));
  seen = watched(true, long_event + "data: [DONE]\n\n", 4096);
  EXPECT_EQ(seen.end, AnswerEnd::complete);
  EXPECT_EQ(seen.usage, Usage{});
}

TEST(AnswerWatcher, CallingFinishAgainGivesTheSameAnswer) {
  AnswerWatcher watcher(true);
  watcher.feed(kChatStream);
  EXPECT_EQ(watcher.finish(), AnswerEnd::complete);
  watcher.feed("event: error\n\n");
  EXPECT_EQ(watcher.finish(), AnswerEnd::complete);
}

// ---------------------------------------------------------------- bodies that are not streams

TEST(AnswerWatcher, ReadsTheUsageOfTheThreeApisBodies) {
  const std::string chat =
      R"({"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,)"
      R"("message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}})";
  const std::string responses =
      R"({"id":"resp_1","object":"response","status":"completed","output":[{"type":"message",)"
      R"("content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":20,)"
      R"("input_tokens_details":{"cached_tokens":4},"output_tokens":8,"total_tokens":28}})";
  const std::string anthropic =
      R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text",)"
      R"("text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,)"
      R"("cache_creation_input_tokens":5,"cache_read_input_tokens":3,"output_tokens":4}})";
  for (std::size_t piece : {SIZE_MAX, std::size_t{1}, std::size_t{13}}) {
    EXPECT_EQ(watched(false, chat, piece).usage, tokens(9, 12));
    EXPECT_EQ(watched(false, responses, piece).usage, tokens(20, 8));
    EXPECT_EQ(watched(false, anthropic, piece).usage, tokens(18, 4));
    EXPECT_EQ(watched(false, anthropic, piece).end, AnswerEnd::complete);
  }
}

TEST(AnswerWatcher, ABodyWithoutUsageIsCompleteWithUsageUnknown) {
  for (const std::string body : {"", "<html>bad gateway</html>", R"({"error":{"type":"x"}})",
                                 R"({"usage":{"prompt_tokens":-1}})", "[1,2]"}) {
    const auto seen = watched(false, body);
    EXPECT_EQ(seen.end, AnswerEnd::complete) << body;
    EXPECT_EQ(seen.usage, Usage{}) << body;
  }
}

// The usage is read as a parsed document would give it (no document is built): a key given
// twice keeps its last value, a count is an unsigned integer, only the three places count, and
// JSON that does not parse or is nested deeper than 64 levels says nothing.
TEST(AnswerWatcher, ReadsTheUsageAsAParsedDocumentHoldsIt) {
  const auto usage_of = [](const std::string& body) { return watched(false, body).usage; };
  EXPECT_EQ(usage_of(R"({"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}})"),
            (Usage{std::nullopt, 2}));
  EXPECT_EQ(usage_of(R"({"usage":{"prompt_tokens":1},"usage":null})"), Usage{});
  EXPECT_EQ(usage_of(R"({"usage":{"prompt_tokens":1,"prompt_tokens":2.5}})"), Usage{});
  EXPECT_EQ(usage_of(R"({"usage":{"prompt_tokens":1,"prompt_tokens":3}})"),
            (Usage{3, std::nullopt}));
  EXPECT_EQ(usage_of(R"({"message":{"usage":{"input_tokens":4}},"message":{"id":1}})"), Usage{});
  EXPECT_EQ(usage_of(R"({"response":{"usage":{"output_tokens":5}},"usage":{"input_tokens":1}})"),
            tokens(1, 5));
  EXPECT_EQ(usage_of(R"({"usage":{"completion_tokens":6,"output_tokens":7}})"),
            (Usage{std::nullopt, 7}));
  EXPECT_EQ(usage_of(R"({"usage":{"prompt_tokens":{"x":1},"completion_tokens":[8]}})"), Usage{});
  for (const std::string nowhere :
       {R"({"x":{"usage":{"prompt_tokens":1}}})",
        R"({"x":{"message":{"usage":{"input_tokens":1}}}})",
        R"({"message":{"x":{"usage":{"input_tokens":1}}}})", R"([{"usage":{"prompt_tokens":1}}])",
        R"({"usage":[{"prompt_tokens":1}]})", R"({"usage":{"prompt_tokens":1}} x)",
        R"({"usage":{"prompt_tokens":1})"})
    EXPECT_EQ(usage_of(nowhere), Usage{}) << nowhere;
  const auto nested = [](int levels) {
    return R"({"usage":{"prompt_tokens":1},"deep":)" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  EXPECT_EQ(usage_of(nested(64)), (Usage{1, std::nullopt}));
  EXPECT_EQ(usage_of(nested(65)), Usage{});
}

// An event's "type" counts at its top only, and its last value when given twice.
TEST(AnswerWatcher, ReadsAnEventsTypeAtItsTopOnly) {
  const auto end_of = [](const std::string& data) {
    return watched(true, "data: " + data + "\n\n").end;
  };
  EXPECT_EQ(end_of(R"({"type":"message_stop"})"), AnswerEnd::complete);
  EXPECT_EQ(end_of(R"({"x":{"type":"message_stop"}})"), AnswerEnd::error);
  EXPECT_EQ(end_of(R"({"type":"message_stop","type":1})"), AnswerEnd::error);
  EXPECT_EQ(end_of(R"({"type":"ping","type":"message_stop"})"), AnswerEnd::complete);
}

TEST(AnswerWatcher, ABodyOverTheLimitHasItsUsageUnknown) {
  const std::string head = R"({"usage":{"prompt_tokens":1,"completion_tokens":2},"pad":")";
  const std::string tail = "\"}";
  AnswerWatcher small(false);
  small.feed(head + "x" + tail);
  small.finish();
  EXPECT_EQ(small.usage(), tokens(1, 2));

  AnswerWatcher large(false);
  large.feed(head);
  const std::string block(1 << 20, 'x');
  for (std::size_t fed = 0; fed <= kMaxAnswerJsonBytes; fed += block.size()) large.feed(block);
  large.feed(tail);
  EXPECT_EQ(large.finish(), AnswerEnd::complete);
  EXPECT_EQ(large.usage(), Usage{});
}

// ---------------------------------------------------------------- a recorded stream's events

TEST(AnswerEvents, SplitsAStreamAtItsBlankLines) {
  const std::string body = "data: a\n\nevent: x\ndata: b\r\n\r\ndata: c\n\n";
  const auto events = stream_events(body);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], "data: a\n\n");
  EXPECT_EQ(events[1], "event: x\ndata: b\r\n\r\n");
  EXPECT_EQ(events[2], "data: c\n\n");
}

TEST(AnswerEvents, KeepsARestWithoutItsBlankLineAsTheLastPiece) {
  const std::string body = "data: a\n\ndata: b\n";
  const auto events = stream_events(body);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], "data: b\n");
  EXPECT_TRUE(stream_events("").empty());
}

TEST(AnswerEvents, PiecesJoinedAreTheBody) {
  for (const auto& body : {kChatStream, kAnthropicStream, with_crlf(kAnthropicStream),
                           responses_stream("response.completed") + "data: torn"}) {
    std::string joined;
    const auto events = stream_events(body);
    for (const auto event : events) joined.append(event);
    EXPECT_EQ(joined, body);
    EXPECT_GT(events.size(), 2u);
  }
  EXPECT_EQ(stream_events(kAnthropicStream).size(), 7u);
}

}  // namespace
}  // namespace inflight::models
