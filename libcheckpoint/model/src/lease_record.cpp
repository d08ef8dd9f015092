#include "inflight/checkpoint/lease_record.hpp"

#include <limits>

#include "inflight/checkpoint/commit_message.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint {

namespace {

constexpr std::string_view kLeaseSubjectPrefix = "inflight lease ";
constexpr std::string_view kUntilTrailer = "Inflight-Lease-Until";

}  // namespace

std::string write_lease_message(const Lease& lease) {
  return std::string(kLeaseSubjectPrefix) + lease.pod + "\n\n" +
         trailer_line(kPodTrailer, lease.pod) +
         trailer_line(kUntilTrailer, std::to_string(lease.until));
}

std::optional<Lease> parse_lease_message(std::string_view message, std::int64_t now) {
  const auto pod = find_trailer(message, kPodTrailer);
  const auto until_text = find_trailer(message, kUntilTrailer);
  if (!pod || !is_valid_pod_name(*pod) || !until_text) return std::nullopt;
  const auto until = parse_decimal<std::int64_t>(
      *until_text, std::numeric_limits<std::int64_t>::min(), now + kLongestLease);
  if (!until) return std::nullopt;
  return Lease{.pod = std::string(*pod), .until = *until};
}

}  // namespace inflight::checkpoint
