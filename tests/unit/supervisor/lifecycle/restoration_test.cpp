// Restoration against the in-memory store (docs/checkpoints.md "Restore on start"): the
// first look takes the lease and resumes the runs it claimed, lists the runs
// this instance cannot run, stops serve when the store refuses our
// credentials, and every later look comes a period on, or just after the
// first known lease of another pod ends.
#include "inflight/supervisor/lifecycle/restoration.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"
#include "supervisor/supervisor_fixture.hpp"

namespace inflight {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class RestorationTest : public SupervisorFixture {
 protected:
  RestorationTest() {
    serve.store.runs_dir = runs.path();
    serve.store.pod_name = "pod-a";
    serve.checkpoint_interval = Duration::zero();  // looks a lease period (30 s) apart
    serve.children = templates;
  }

  Restoration& start() {
    restoration =
        std::make_unique<Restoration>(io, supervisor(), store, plan, lease, serve,
                                      [this](const std::string& error) { refused = error; });
    restoration->start();
    return *restoration;
  }

  // A run that pod-b started and lost: its first attempt was interrupted.
  checkpoint::RunParams run_of_pod_b(const std::string& id, const std::string& child) const {
    checkpoint::RunParams params;
    params.run_id = id;
    params.child_name = child;
    params.origin_pod = "pod-b";
    params.created_at = "2026-01-01T00:00:00Z";
    checkpoint::AttemptRecord first;
    first.attempt = 1;
    first.pod = "pod-b";
    first.started_at = params.created_at;
    first.outcome = "interrupted";
    params.attempts.push_back(first);
    return params;
  }

  // A run of a template this instance does not have.
  checkpoint::HeldRun held_run() const {
    return {run_of_pod_b("r-held", "promptfoo"), "inflight/pod-b/r-held",
            "no child template named 'promptfoo'"};
  }
  // Gone before the next look: that look comes at once, not a period on.
  // A run left to pod-b, whose lease the store reports with a term of 0 s:
  // over as soon as it was seen once, unchanged.
  static RestoreResult left_to_a_lease_of_no_term() {
    RestoreResult found;
    found.left = {{"r-left", "pod-b", 0}};
    found.watched = {{.ref = "refs/heads/inflight-lease/pod-b",
                      .oid = std::string(40, 'b'),
                      .term = 0,
                      .written = 0,
                      .pod = "pod-b"}};
    found.published.emplace();  // the store answered
    return found;
  }

  ServeSettings serve;
  PodLease lease{io, store, lease_terms(Duration::zero(), seconds(30)), seconds(60)};
  ShutdownPlan plan{io, supervisor(), &lease, seconds(30), seconds(2), [](int) {}};
  std::unique_ptr<Restoration> restoration;
  std::optional<std::string> refused;
};

TEST_F(RestorationTest, ClaimedRunsResumeWithTheirNextAttempt) {
  const auto dir = runs.path() / "r-claimed";
  RestoreResult found;
  found.runs = {{dir, run_of_pod_b("r-claimed", "sleeper"), "inflight/pod-b/r-claimed", "c1a1m"}};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] {
    const inflight::Run* run = supervisor().find("r-claimed");
    return run && run->status() == RunStatus::running;
  }));

  const inflight::Run& run = *supervisor().find("r-claimed");
  EXPECT_EQ(supervisor().phase(), Phase::ready);
  EXPECT_EQ(run.dir, dir);
  EXPECT_EQ(run.checkpoint.branch, "inflight/pod-b/r-claimed");
  EXPECT_EQ(run.checkpoint.last_commit, "c1a1m");  // the claim is its checkpoint
  ASSERT_EQ(run.params.attempts.size(), 2u);
  EXPECT_EQ(run.params.attempts[1].attempt, 2);
  EXPECT_EQ(run.params.attempts[1].pod, "pod-a");
  EXPECT_EQ(run.params.argv.back(), "resumed");
  // The first look takes the lease before it claims anything.
  ASSERT_EQ(store.restores().size(), 1u);
  EXPECT_TRUE(store.restores()[0].lease_until.has_value());
}

// docs/serve.md "The two budgets": interruptions do not spend --max-attempts (3 here),
// they spend --max-interruptions; the pod's lease and lost claims show in
// what /metrics reads.
TEST_F(RestorationTest, ARunInterruptedMoreOftenThanMaxAttemptsResumes) {
  auto params = run_of_pod_b("r-rolled", "sleeper");
  for (int n = 2; n <= 5; ++n) {
    auto attempt = params.attempts.front();
    attempt.attempt = n;
    params.attempts.push_back(attempt);
  }
  RestoreResult found;
  found.runs = {{runs.path() / "r-rolled", params, "inflight/pod-b/r-rolled", "c1a1m"}};
  found.claims_lost = 2;
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] {
    const inflight::Run* run = supervisor().find("r-rolled");
    return run && run->status() == RunStatus::running;
  }));
  const auto spent = checkpoint::spent_budgets(supervisor().find("r-rolled")->params);
  EXPECT_EQ(spent.interruptions, 5);
  EXPECT_EQ(spent.failures, 0);
  EXPECT_EQ(supervisor().run_events().restored, 1u);
  EXPECT_EQ(supervisor().run_events().claims_lost, 2u);
  ASSERT_TRUE(lease.expiry().has_value());
  EXPECT_EQ(*lease.expiry(), *store.restores()[0].lease_until);
}

TEST_F(RestorationTest, ARunAtMaxInterruptionsOrMaxAttemptsIsFailedNotStarted) {
  auto settings = this->settings();
  settings.max_interruptions = 1;
  make_supervisor(settings);
  auto crashed = run_of_pod_b("r-crashed", "sleeper");
  crashed.attempts.front().outcome = "crashed";
  for (int n = 2; n <= 3; ++n) {
    auto attempt = crashed.attempts.front();
    attempt.attempt = n;
    crashed.attempts.push_back(attempt);
  }
  RestoreResult found;
  found.runs = {{runs.path() / "r-rolled", run_of_pod_b("r-rolled", "sleeper"),
                 "inflight/pod-b/r-rolled", "c1"},
                {runs.path() / "r-crashed", crashed, "inflight/pod-b/r-crashed", "c2"}};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return supervisor().phase() == Phase::ready; }));
  for (const char* id : {"r-rolled", "r-crashed"}) {
    const inflight::Run* run = supervisor().find(id);
    ASSERT_NE(run, nullptr) << id;
    EXPECT_EQ(run->status(), RunStatus::failed) << id;
    EXPECT_EQ(run->params.final_status, "failed") << id;
  }
  const auto& spent = supervisor().run_events().out_of_budget;
  EXPECT_EQ(spent.at(Budget::interruptions), 1u);
  EXPECT_EQ(spent.at(Budget::attempts), 1u);
  EXPECT_EQ(supervisor().live_children(), 0);
}

TEST_F(RestorationTest, HeldRunsAreListedAndNeverStarted) {
  RestoreResult found;
  found.held = {held_run()};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return supervisor().phase() == Phase::ready; }));

  const inflight::Run* run = supervisor().find("r-held");
  ASSERT_NE(run, nullptr);
  EXPECT_TRUE(run->lifecycle.held());
  EXPECT_EQ(run->held_reason, "no child template named 'promptfoo'");
  EXPECT_EQ(run->status(), RunStatus::interrupted);
  EXPECT_EQ(run->checkpoint.branch, "inflight/pod-b/r-held");
  EXPECT_EQ(supervisor().live_children(), 0);
}

TEST_F(RestorationTest, LocalRunsAreOfferedForTheLocalVersusBranchRule) {
  auto params = run_of_pod_b("r-local", "sleeper");
  std::filesystem::create_directories(runs.path() / "r-local");
  checkpoint::write_run_params(runs.path() / "r-local", params);
  start();
  ASSERT_EQ(store.restores().size(), 1u);
  ASSERT_EQ(store.restores()[0].local.size(), 1u);
  EXPECT_EQ(store.restores()[0].local[0].params.run_id, "r-local");
  EXPECT_FALSE(store.restores()[0].leave_handovers);
}

TEST_F(RestorationTest, RefusedCredentialsOnTheFirstLookAreFatal) {
  RestoreResult found;
  found.failure = Error{.kind = Failure::auth, .message = "401 Unauthorized", .candidates = {}};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return refused.has_value(); }));
  EXPECT_EQ(refused, "401 Unauthorized");
  EXPECT_EQ(supervisor().phase(), Phase::restoring);  // never ready
}

TEST_F(RestorationTest, AnUnreachableStoreIsAskedAgainAtTheNextPeriod) {
  serve.checkpoint_interval = milliseconds(20);  // the lease period, too
  RestoreResult found;
  found.failure =
      Error{.kind = Failure::unreachable, .message = "connection refused", .candidates = {}};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return store.restores().size() >= 2; }));
  EXPECT_EQ(supervisor().phase(), Phase::ready);  // local runs only, meanwhile
  EXPECT_FALSE(refused.has_value());
  EXPECT_FALSE(store.restores()[1].lease_until.has_value());  // the pushes renew it now
}

// The next look comes as the watched lease's term ends (by this pod's
// steady clock), and it tells the store that lease is over.
TEST_F(RestorationTest, ALookComesSoonerWhenAWatchedRecordsTermEnds) {
  auto found = left_to_a_lease_of_no_term();
  store.restore_next(found);
  found.failure = Error{.kind = Failure::auth, .message = "401 Unauthorized", .candidates = {}};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return store.restores().size() >= 3; }));
  EXPECT_FALSE(refused.has_value());  // refused on a later look: only logged
  EXPECT_TRUE(store.restores()[0].expired.empty());
  EXPECT_EQ(store.restores()[1].expired.at("refs/heads/inflight-lease/pod-b"),
            std::string(40, 'b'));
}

// docs/results.md "The history layout": a restore that read no entry of the log lists only the
// runs with a result ref. A submit of any other run id a client names waits for the store's
// look-up: published elsewhere, it is answered with its status and starts nothing; not, it runs. A
// generated id asks nothing.
TEST_F(RestorationTest, OnAPartialListASubmittedRunIdIsLookedUpBeforeItRuns) {
  RestoreResult found;
  found.published.emplace();
  found.published->push_back({.run_id = "r-with-ref", .entry = std::nullopt});
  found.published_partial = true;
  store.restore_next(found);
  checkpoint::IndexEntry folded;
  folded.id = "r-folded";
  folded.final_status = "failed";
  folded.result = checkpoint::result_ref("r-folded");
  store.published_elsewhere(
      {.run_id = "r-folded", .answer = checkpoint::LookedUpRun::Answer::yes, .entry = folded});
  start();
  ASSERT_TRUE(wait_for([&] { return supervisor().phase() == Phase::ready; }));

  const auto submitted = [&](const std::string& id) {
    const OrderedJson body{{"id", id}};
    auto result = supervisor().submit(body);
    if (!result.look_up) return result;
    EXPECT_EQ(*result.look_up, id);
    bool answered = false;
    supervisor().look_up(id, [&](std::optional<Error> failure) {
      EXPECT_FALSE(failure);
      answered = true;
    });
    EXPECT_TRUE(wait_for([&] { return answered; }));
    return supervisor().submit(body, true);
  };
  const auto published = submitted("r-folded");
  EXPECT_EQ(published.http_status, 200);
  ASSERT_TRUE(published.run);
  EXPECT_EQ(published.run->status(), RunStatus::failed);
  EXPECT_EQ(submitted("r-new").http_status, 202);
  // Listed with its result ref, without its entry: looked up for its status, which this store
  // cannot give.
  EXPECT_EQ(submitted("r-with-ref").http_status, 409);
  EXPECT_EQ(supervisor().submit(OrderedJson::object()).http_status, 202);
  EXPECT_EQ(store.looked_up(), (std::vector<std::string>{"r-folded", "r-new", "r-with-ref"}));
}

TEST_F(RestorationTest, LaterLooksSkipTheRunsThisInstanceHolds) {
  auto found = left_to_a_lease_of_no_term();
  found.held = {held_run()};
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return store.restores().size() >= 2; }));
  EXPECT_TRUE(store.restores()[1].skip.contains("r-held"));
}

// docs/checkpoints.md "Leases and clocks": a pod that held no run let its
// lease go; the claims of a later look hold their runs for a claim's lease
// only, so the pod's lease is renewed at once, on its own.
TEST_F(RestorationTest, ALaterLookThatTakesRunsWhileTheLeaseIsLetGoRenewsItAtOnce) {
  store.restore_next(left_to_a_lease_of_no_term());
  RestoreResult found;
  found.runs = {{runs.path() / "r-taken", run_of_pod_b("r-taken", "sleeper"),
                 "inflight/pod-b/r-taken", "c1a1m"}};
  found.published.emplace();
  store.restore_next(found);
  start();
  ASSERT_TRUE(wait_for([&] { return supervisor().phase() == Phase::ready; }));
  ASSERT_TRUE(lease.held());
  lease.let_go();
  EXPECT_FALSE(lease.held());
  EXPECT_FALSE(lease.expiry().has_value());  // /metrics shows none
  ASSERT_TRUE(wait_for([&] { return supervisor().find("r-taken") != nullptr; }));
  EXPECT_FALSE(store.restores()[1].lease_until.has_value());  // the look itself takes none
  ASSERT_TRUE(wait_for([&] { return lease.expiry().has_value(); }));
  EXPECT_EQ(store.lease_holds().size(), 1u);
}

// A branch copy the disk had no room for: a check's small write, or a
// checkpoint that landed, would pass on that disk and make the pod ready
// until the next look fails again. Only after a restore that writes its
// copies may a check make it ready.
TEST_F(RestorationTest, ACopyTheDiskCouldNotWriteKeepsThePodNotReadyUntilARestoreWrites) {
  auto full = left_to_a_lease_of_no_term();
  full.disk_failure = "write r-big/data.bin: No space left on device";
  store.restore_next(full);
  store.restore_next(full);
  store.restore_next(left_to_a_lease_of_no_term());  // room again
  start();
  ASSERT_TRUE(wait_for([&] { return supervisor().disk_health().problem().has_value(); }));
  supervisor().disk_health().report(Landed{.commit = std::nullopt, .left_out = {}});
  EXPECT_TRUE(supervisor().disk_health().problem().has_value());
  ASSERT_TRUE(wait_for([&] { return store.restores().size() == 2; }));
  EXPECT_TRUE(supervisor().disk_health().problem().has_value());
  EXPECT_EQ(store.checks(), 0);  // a check could not tell
  // The third look writes no copy it could not: a check decides again.
  ASSERT_TRUE(wait_for([&] { return !supervisor().disk_health().problem(); }));
  EXPECT_EQ(store.restores().size(), 3u);
  EXPECT_EQ(store.checks(), 1);
}

}  // namespace
}  // namespace inflight
