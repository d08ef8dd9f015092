"""The git servers of the support package (inflight_testing.git_servers) and
their fixtures in conftest.py, exercised with the git CLI only,
so they are known to work before the inflight binary is pointed at them."""

import socket
import subprocess

import pytest

from inflight_testing.git_servers import (branches, git, make_commit, port_open, start_git_daemon,
                                          start_http_git, start_https_git, start_ssh_git)
from inflight_testing.procfs import process_exists
from inflight_testing.proxies import HungServer

REF = "refs/heads/inflight/p/r"


def push_commit(server, workdir):
    sha = make_commit(workdir / "local")
    git(workdir / "local", "push", "-q", server.cli_url, f"HEAD:{REF}", env=server.env)
    return sha


def ls_remote(server, url=None, env=None):
    out = git(None, "ls-remote", url or server.cli_url, "refs/heads/inflight/*",
              env=server.env if env is None else env)
    return {ref: sha for sha, ref in (line.split("\t") for line in out.splitlines())}


# ---------------------------------------------------------------- round trip


def test_push_ls_remote_fetch_delete_round_trip(git_server, tmp_path):
    sha = push_commit(git_server, tmp_path)
    assert branches(git_server.bare) == {REF: sha}
    assert ls_remote(git_server) == {REF: sha}

    clone = tmp_path / "fetched"
    git(None, "init", "-q", clone)
    git(clone, "fetch", "-q", git_server.cli_url, f"{REF}:{REF}", env=git_server.env)
    assert git(clone, "rev-parse", REF).strip() == sha

    git(tmp_path / "local", "push", "-q", git_server.cli_url, f":{REF}", env=git_server.env)
    assert branches(git_server.bare) == {}
    assert ls_remote(git_server) == {}


def test_every_fixture_exposes_url_bare_and_flags(git_server):
    assert git_server.url and isinstance(git_server.flags, list)
    assert git(git_server.bare, "rev-parse", "--is-bare-repository").strip() == "true"


def test_local_repo_urls(bare_repo, file_repo):
    assert bare_repo.url == str(bare_repo.bare) and bare_repo.flags == []
    assert bare_repo.file_url == f"file://{bare_repo.bare}"
    assert file_repo.url.startswith("file:///")


# ---------------------------------------------------------------- http(s)


def test_http_flags_carry_the_token(http_git):
    assert http_git.url.startswith("http://127.0.0.1:")
    assert http_git.url.endswith("/git/results.git")
    assert http_git.flags == ["--git-username", "inflight", "--git-token", http_git.token]
    assert http_git.wrong_flags[3] != http_git.token


@pytest.mark.parametrize("fixture", ["http_git", "https_git"])
def test_http_requires_the_right_token(fixture, request, tmp_path):
    server = request.getfixturevalue(fixture)
    make_commit(tmp_path / "local")
    # Without credentials git would have to prompt; with a wrong token lighttpd says 401.
    for url, error in ((server.url, "could not read Username"),
                       (server.wrong_cli_url, "Authentication failed")):
        with pytest.raises(AssertionError, match=error):
            git(tmp_path / "local", "push", url, f"HEAD:{REF}", env=server.env)
    assert branches(server.bare) == {}


def test_https_flags_and_certificate(https_git):
    assert https_git.url.startswith("https://127.0.0.1:")
    assert https_git.flags[-2:] == ["--git-ca-file", str(https_git.ca_file)]
    # curl checks the IP SAN against 127.0.0.1 with only our CA trusted.
    out = subprocess.run(["curl", "-sS", "--cacert", str(https_git.ca_file), "-o", "/dev/null",
                          "-w", "%{http_code}", https_git.url + "/info/refs"],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout == "401", out.stderr
    san = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName",
                          "-in", str(https_git.ca_file.parent / "server.pem")],
                         capture_output=True, text=True, check=True).stdout
    assert "IP Address:127.0.0.1" in san


def test_https_is_refused_without_the_ca(https_git):
    with pytest.raises(AssertionError, match="certificate"):
        git(None, "ls-remote", https_git.cli_url, env={"GIT_SSL_CAINFO": "/dev/null"})


# ---------------------------------------------------------------- ssh


def test_ssh_flags_and_known_hosts(ssh_git):
    assert ssh_git.url == f"ssh://root@127.0.0.1:{ssh_git.port}{ssh_git.bare}"
    assert ssh_git.flags == ["--git-ssh-key", str(ssh_git.key),
                             "--git-ssh-known-hosts", str(ssh_git.known_hosts)]
    line = ssh_git.known_hosts.read_text()
    assert line.startswith(f"[127.0.0.1]:{ssh_git.port} ssh-ed25519 AAAA")
    assert ssh_git.rsa_key.read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")


@pytest.mark.parametrize("key", ["ecdsa_key", "rsa_key"])
def test_ssh_server_accepts_the_other_authorized_keys(ssh_git, key):
    # The server takes these too, so a negative test with them fails client side.
    env = {"GIT_SSH_COMMAND": ssh_git.ssh_command.replace(str(ssh_git.key),
                                                          str(getattr(ssh_git, key)))}
    assert ls_remote(ssh_git, env=env) == {}


def test_ssh_rejects_an_unauthorized_key(ssh_git):
    with pytest.raises(AssertionError, match="Permission denied"):
        ls_remote(ssh_git, env=ssh_git.wrong_env)


def test_ssh_checks_the_host_key(ssh_git, tmp_path):
    other = tmp_path / "other_known_hosts"
    other.write_text(f"[127.0.0.1]:{ssh_git.port} " +
                     " ".join(ssh_git.unauthorized_key.with_suffix(".pub").read_text().split()[:2])
                     + "\n")
    env = {"GIT_SSH_COMMAND": ssh_git.ssh_command.replace(str(ssh_git.known_hosts), str(other))}
    with pytest.raises(AssertionError, match="HOST IDENTIFICATION HAS CHANGED|verification failed"):
        ls_remote(ssh_git, env=env)


# ---------------------------------------------------------------- hung server


def test_hung_server_accepts_and_never_answers(hung_server):
    with socket.create_connection(("127.0.0.1", hung_server.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(1)
    assert hung_server.git_url == f"git://127.0.0.1:{hung_server.port}/results.git"
    assert hung_server.http_url == f"http://127.0.0.1:{hung_server.port}/git/results.git"


def test_git_hangs_against_the_hung_server(hung_server):
    with pytest.raises(subprocess.TimeoutExpired):
        git(None, "ls-remote", hung_server.git_url, timeout=1)
    assert hung_server.connections >= 1


# ---------------------------------------------------------------- teardown


@pytest.mark.parametrize("start", [start_git_daemon, start_http_git, start_https_git,
                                   start_ssh_git])
def test_teardown_kills_the_process_group(start, tmp_path):
    with start(tmp_path / "server") as server:
        pid = server.process.proc.pid
        assert port_open(server.port)
    assert not process_exists(pid)
    # Not asserted: that the port is closed. ctest runs test files in
    # parallel, and another fixture may already listen on the freed port.


def test_teardown_closes_the_hung_server():
    with HungServer() as server:
        assert port_open(server.port)
    # The port itself may be taken again at once by a test running in parallel.
    assert server.listener.fileno() == -1


def test_two_servers_of_a_kind_get_different_ports(tmp_path):
    with start_git_daemon(tmp_path / "a") as a, start_git_daemon(tmp_path / "b") as b:
        assert a.port != b.port
        assert ls_remote(a) == ls_remote(b) == {}


def test_git_helper_raises_with_stderr(tmp_path):
    with pytest.raises(AssertionError, match="not a git repository"):
        git(tmp_path, "rev-parse", "HEAD")
