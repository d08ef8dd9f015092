"""What the e2e tests (tests/e2e), the benchmarks (bench/) and the container
test (tests/container) share when they drive the built binaries: one way to
wait, real git servers, TCP proxies, a fake model provider, HTTP, the
`inflight serve` process, and reading /proc and run dirs. Stdlib only, so
that benchmarks and the container test need nothing but /usr/bin/python3;
pytest fixtures stay in tests/e2e/conftest.py.

It is put on the path one way, PYTHONPATH=<repo>/tests/support: ctest's
ENVIRONMENT (tests/CMakeLists.txt), bench/run_all.sh and .ci/run set it, and
by hand tests/support/python does.

    waiting      wait_for: a condition polled until a deadline
    http         http(), Response, metric()
    serve        Serve: one `inflight serve` process and its JSON log
    git_servers  the git CLI, bare repos, git daemon, http-backend behind
                 lighttpd (plain and TLS), sshd
    proxies      RelayProxy (counts bytes, adds latency), FlakyRemote (goes
                 down or hangs), HungServer (accepts, never answers)
    procfs       processes as /proc shows them: alive, zombies, children, CPU
    run_dirs     what inflight writes in a run dir
    model_provider  ModelProvider: a fake OpenAI and Anthropic API that
                 keeps a ledger of the calls it was paid for, with faults
"""
