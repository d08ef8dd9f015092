// A call answered from the attempt's journal (docs/models.md "What is
// replayed"): see call.hpp.
#include <boost/asio/write.hpp>

#include "call.hpp"
#include "inflight/core/log.hpp"

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::optional<JournalRecord> recorded_answer(Attempt& attempt, const ModelRoute& route,
                                             const std::string& digest) {
  if (!route.spec.replay || attempt.journal.problem) return std::nullopt;
  const auto it = attempt.journal.by_digest.find(digest);
  // Only a recorded identity is counted: `asked` stays as small as the journal read, where
  // counting every request grew it by one entry a call for the attempt's life.
  if (it == attempt.journal.by_digest.end()) return std::nullopt;
  const auto k = attempt.asked[digest]++;
  if (k >= it->second.size()) return std::nullopt;
  auto entry = read_journal_entry(attempt.journal, it->second[k]);
  // The run dir is the child's to write: what was read is checked again.
  if (entry && entry->digest == digest) return std::move(*entry);
  if (entry) entry = Error{Failure::other, "the recorded answer changed since it was read", {}};
  log::warn("a recorded answer cannot be read; the call goes upstream",
            {{"run_id", attempt.run_id}, {"error", entry.error().message}});
  return std::nullopt;
}

Awaitable<bool> replay(Call& call, Stream& child, const JournalRecord& answer, unsigned version) {
  bool ok = true;
  if (answer.stream) {
    AnswerSink sink(child, version, 0);
    const std::vector<std::pair<std::string, std::string>> no_headers;
    sink.head(static_cast<unsigned>(answer.status), answer.content_type, no_headers);
    for (const auto event : stream_events(answer.body)) {
      if (!ok) break;
      ok = co_await sink.piece(event);
    }
    if (ok) ok = co_await sink.last();
  } else {
    http::response<http::string_body> whole(static_cast<http::status>(answer.status), version);
    whole.set(http::field::content_type, answer.content_type);
    whole.body() = answer.body;
    whole.prepare_payload();
    child.expires_after(kChildWriteDeadline);
    ok = !std::get<0>(co_await http::async_write(child, whole, kAwait));
  }
  call.ended(static_cast<unsigned>(answer.status), "journal", ok ? "ok" : "cut", answer.usage);
  co_return ok;
}

}  // namespace inflight::models
