// The message of a lease commit, written and read here only (docs/checkpoints.md "Leases and
// clocks", "A live pod's runs stay its own"): the subject `inflight lease <pod>` and the trailers
// `Inflight-Pod:` and `Inflight-Lease-Until:`. Plain text in and out, no git; lease.hpp holds the
// git side. A lease read from the results repo is data anyone with push access wrote, so it is
// checked before it can keep anyone's runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inflight::checkpoint {

struct Lease {
  std::string pod;
  std::int64_t until = 0;  // seconds since the epoch
};

// No instance asks for a longer lease; a lease naming more is not one.
inline constexpr std::int64_t kLongestLease = 24 * 3600;

std::string write_lease_message(const Lease& lease);
// nullopt for a message that is not a lease: no valid pod name or end, or an
// end more than a day ahead of `now` (no instance asks for that much).
std::optional<Lease> parse_lease_message(std::string_view message, std::int64_t now);

}  // namespace inflight::checkpoint
