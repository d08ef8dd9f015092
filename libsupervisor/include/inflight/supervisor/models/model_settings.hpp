// What the model-call journal takes from the instance's options and config
// (docs/models.md): the models with their keys, the listener's address and
// the limits on what a child may send and hold.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "inflight/core/model_specs.hpp"

namespace inflight {

struct ModelRoute {
  ModelSpec spec;
  std::string key;  // the real key: sent upstream, never to a child
};

struct ModelSettings {
  std::map<std::string, ModelRoute> models;  // none: no listener, no journal
  std::string listen_host;
  unsigned short listen_port{};
  std::uint64_t max_request_bytes{};  // 413 beyond it
  std::uint64_t max_answer_bytes{};   // passed through, not recorded beyond it
  std::uint64_t max_journal_bytes{};  // a run's journal; recording stops beyond it
  std::size_t max_calls_per_run{};    // calls at once; 429 beyond
  std::size_t max_calls_per_model{};  // calls at once to one model, of every run
  std::size_t max_connections_per_run{};
};

}  // namespace inflight
