"""Real git servers on 127.0.0.1 and the git CLI, for the e2e tests, the
benchmarks and the container test.

Every server listens on a free ephemeral port, is waited for by a condition
with a deadline (never a fixed sleep), runs in its own process group and is
killed with that group when it stops.

The `start_*` context managers yield a `GitServer` (see its docstring) with
one empty bare repo; tests/e2e/conftest.py wraps each in a pytest fixture:

    def test_push(http_git, serve_factory):
        serve = serve_factory("--results-repo", http_git.url, *http_git.flags)
        ...
        assert branches(http_git.bare) == {...}

`GitDaemon` is the daemon alone, serving as many fresh bare repos as a
benchmark makes.
"""

import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .waiting import wait_for

INFLIGHT_PREFIX = "refs/heads/inflight/"
GIT_HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
LIGHTTPD = "/usr/sbin/lighttpd"
MOD_OPENSSL = "/usr/lib/lighttpd/mod_openssl.so"
SSHD = "/usr/sbin/sshd"  # sshd refuses to re-exec itself without an absolute path
START_TIMEOUT = 15
REPO_NAME = "results.git"


# --------------------------------------------------------------------------
# helpers


def git_env(extra=None):
    """Environment for the git CLI: no prompts, no user or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_TERMINAL_PROMPT": "0",  # a wrong token must fail, not wait on a tty
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "inflight-tests", "GIT_AUTHOR_EMAIL": "tests@inflight.invalid",
        "GIT_COMMITTER_NAME": "inflight-tests", "GIT_COMMITTER_EMAIL": "tests@inflight.invalid",
    })
    env.update(extra or {})
    return env


def git(repo, *args, env=None, timeout=60, input=None, binary=False):
    """Runs `git -C repo args...` (or plain `git args...` when repo is None).

    Returns stdout (bytes when `binary`); raises AssertionError with stderr
    when git fails. `env` adds variables to git_env(), e.g. a GitServer's
    `env`; `input` is sent to git's stdin.
    """
    cmd = ["git"] + (["-C", str(repo)] if repo is not None else []) + [str(a) for a in args]
    stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
    proc = subprocess.run(cmd, env=git_env(env), capture_output=True, text=not binary,
                          timeout=timeout, **stdin)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace") if binary else proc.stderr
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr}")
    return proc.stdout


def branches(bare):
    """{ref: sha} of every refs/heads/inflight/* branch in the repo at `bare`."""
    out = git(bare, "for-each-ref", "--format=%(refname) %(objectname)", INFLIGHT_PREFIX)
    return dict(line.split(" ", 1) for line in out.splitlines())


def make_commit(workdir, files=None, message="test commit"):
    """Creates (or extends) a non-bare repo at `workdir` with one commit; returns its sha."""
    workdir = Path(workdir)
    if not (workdir / ".git").exists():
        git(None, "init", "-q", "-b", "main", workdir)
    for name, content in (files or {"file.txt": secrets.token_hex(8)}).items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(content)
    git(workdir, "add", "-A")
    git(workdir, "commit", "-q", "-m", message)
    return git(workdir, "rev-parse", "HEAD").strip()


def free_port():
    """A port the kernel just handed out; servers retry if someone races us to it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def init_bare(path, http=False):
    git(None, "init", "-q", "--bare", "-b", "main", path)
    if http:
        # http-backend refuses pushes from anonymous CGI requests unless enabled;
        # lighttpd's mod_auth has already checked the credentials (when it asks for any).
        git(path, "config", "http.receivepack", "true")
    return Path(path)


# --------------------------------------------------------------------------
# server processes


class PortTaken(Exception):
    """The server lost the race for its port; start again on another one."""


class ServerProcess:
    """A daemon in its own process group whose output goes to `log` (a file,
    so a chatty server can never block on a full pipe)."""

    def __init__(self, argv, log, env=None, cwd=None):
        self.argv = [str(a) for a in argv]
        self.log = Path(log)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                         start_new_session=True)

    def output(self, extra_logs=()):
        text = ""
        for path in (self.log, *extra_logs):
            if Path(path).exists():
                text += f"--- {path}\n{Path(path).read_text(errors='replace')}"
        return text

    def wait_ready(self, ready, what, extra_logs=()):
        """Waits until ready() holds; fails (or asks for a new port) if the process dies."""
        def started():
            if ready():
                return "ready"
            return self.proc.poll() is not None and "exited"
        try:
            if wait_for(started, START_TIMEOUT, what) == "ready":
                return
        except AssertionError:
            pass  # timed out: reported below, with the server's output
        output = self.output(extra_logs)
        self.stop()
        if "already in use" in output:
            raise PortTaken(output)
        state = ("exited with %s" % self.proc.returncode
                 if self.proc.returncode is not None else "timed out")
        raise AssertionError(f"{what} {state}: {' '.join(self.argv)}\n{output}")

    def stop(self):
        """Kills the whole process group (forked git daemon children, CGIs...)."""
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        # Stragglers of the group (e.g. a CGI mid-request) may outlive the leader.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def start_on_free_port(start, attempts=5):
    """Calls start(port) with fresh ports until one is not stolen between
    free_port() and the server's bind."""
    for attempt in range(attempts):
        try:
            return start(free_port())
        except PortTaken:
            if attempt == attempts - 1:
                raise


@dataclass
class GitServer:
    """What a fixture yields.

    url         --results-repo value for inflight
    bare        Path of the bare repo on disk (inspect with git(bare, ...) / branches(bare))
    flags       extra inflight flags needed to reach it (credentials, CA, ssh key)
    cli_url     URL for the git CLI (http(s): credentials embedded)
    env         environment the git CLI needs (GIT_SSL_CAINFO, GIT_SSH_COMMAND)
    wrong_flags inflight flags that must be rejected (bad token / unauthorized key), or None
    wrong_cli_url, wrong_env   the same for the git CLI
    kind        "path", "file", "git", "http", "https" or "ssh"
    port, log   listening port and server log (None for local repos)
    extra       transport specific values, also reachable as attributes
                (http(s): username, token, ca_file; ssh: key, ecdsa_key, rsa_key,
                 unauthorized_key, known_hosts, ssh_command)
    """

    kind: str
    url: str
    bare: Path
    flags: list = field(default_factory=list)
    cli_url: Optional[str] = None
    env: dict = field(default_factory=dict)
    wrong_flags: Optional[list] = None
    wrong_cli_url: Optional[str] = None
    wrong_env: Optional[dict] = None
    port: Optional[int] = None
    log: Optional[Path] = None
    process: Optional[ServerProcess] = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.cli_url is None:
            self.cli_url = self.url

    def __getattr__(self, name):
        # Only called for names that are not fields: ca_file, rsa_key, token...
        extra = self.__dict__.get("extra", {})
        if name in extra:
            return extra[name]
        raise AttributeError(name)


# --------------------------------------------------------------------------
# local repos


@contextlib.contextmanager
def start_bare_repo(workdir, file_url=False):
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    bare = init_bare(workdir / REPO_NAME)
    url = f"file://{bare}" if file_url else str(bare)
    yield GitServer(kind="file" if file_url else "path", url=url, bare=bare,
                    extra={"path_url": str(bare), "file_url": f"file://{bare}"})


# --------------------------------------------------------------------------
# git daemon


class GitDaemon:
    """`git daemon` exporting every bare repo under `base`, receive-pack on,
    listening on `listen` (0.0.0.0 to be reached from containers too);
    `env` adds to its git_env(), e.g. a GIT_CONFIG_GLOBAL of a test's own."""

    def __init__(self, base, listen="127.0.0.1", env=None):
        self.base = Path(base)
        self.listen = listen
        self.env = env
        self.base.mkdir(parents=True, exist_ok=True)
        self.port, self.process = start_on_free_port(self._start)
        self.log = self.process.log

    def _start(self, port):
        process = ServerProcess(
            ["git", "daemon", "--verbose", "--reuseaddr", "--export-all",
             "--enable=receive-pack", f"--base-path={self.base}", f"--listen={self.listen}",
             f"--port={port}", f"--pid-file={self.base / 'daemon.pid'}", str(self.base)],
            self.base / "daemon.log", env=git_env(self.env))
        # --verbose makes the daemon print this once its sockets are bound.
        process.wait_ready(lambda: "Ready to rumble" in process.output(), "git daemon")
        return port, process

    def new_repo(self, name):
        """A fresh bare repo; returns (its path, its git:// url)."""
        return init_bare(self.base / name), self.url(name)

    def url(self, name, port=None):
        """The repo's git:// url; `port` puts a proxy's port in it instead."""
        return f"git://127.0.0.1:{port or self.port}/{name}"

    def stop(self):
        self.process.stop()


@contextlib.contextmanager
def start_git_daemon(workdir, listen="127.0.0.1"):
    daemon = GitDaemon(workdir, listen)
    try:
        bare, url = daemon.new_repo(REPO_NAME)
        yield GitServer(kind="git", url=url, bare=bare, port=daemon.port, log=daemon.log,
                        process=daemon.process)
    finally:
        daemon.stop()


# --------------------------------------------------------------------------
# lighttpd + git http-backend


def lighttpd_conf(workdir, port, userfile, tls=None):
    """Config for git http-backend as CGI under /git behind basic auth (none without a
    `userfile`)."""
    modules = ["mod_alias", "mod_setenv", "mod_cgi"] + (["mod_auth", "mod_authn_file"]
                                                        if userfile else [])
    if tls:
        modules.append("mod_openssl")
    conf = f"""
server.modules = ({", ".join(f'"{m}"' for m in modules)})
server.bind = "127.0.0.1"
server.port = {port}
server.document-root = "{workdir / 'htdocs'}"
server.errorlog = "{workdir / 'lighttpd-error.log'}"
server.breakagelog = "{workdir / 'lighttpd-cgi-stderr.log'}"

alias.url = ("/git" => "{GIT_HTTP_BACKEND}")
$HTTP["url"] =~ "^/git" {{
    cgi.assign = ("" => "")
    setenv.add-environment = (
        "GIT_PROJECT_ROOT" => "{workdir}",
        "GIT_HTTP_EXPORT_ALL" => "1",
        "GIT_CONFIG_NOSYSTEM" => "1",
    )
}}
"""
    if userfile:
        conf += f"""
auth.backend = "plain"
auth.backend.plain.userfile = "{userfile}"
auth.require = ("/git" => ("method" => "basic", "realm" => "inflight-tests",
                           "require" => "valid-user"))
"""
    if tls:
        conf += f"""
ssl.engine = "enable"
ssl.pemfile = "{tls['cert']}"
ssl.privkey = "{tls['key']}"
"""
    return conf


def make_tls_certs(certdir, host="127.0.0.1"):
    """A throwaway CA and a server cert for `host` signed by it.

    For an IP address (the default, 127.0.0.1) the SAN carries IP:HOST (what
    OpenSSL/curl/git CLI check for an IP host) and also DNS:HOST, because
    mbedTLS 2.28 (libgit2's TLS backend on Debian 12) only matches dNSName SAN
    entries, even for an IP literal. For a name ("localhost") it carries
    DNS:HOST alone, so that the cert does not match the host's address.
    """
    certdir = Path(certdir)
    certdir.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (certdir / n for n in
                                  ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
            "-subj", "/CN=inflight test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", key, "-out", csr, "-subj", f"/CN={host}")
    try:
        ipaddress.ip_address(host)
        san = f"IP:{host}, DNS:{host}"
    except ValueError:
        san = f"DNS:{host}"
    ext = certdir / "server.ext"
    ext.write_text(f"subjectAltName = {san}\n"
                   "basicConstraints = critical, CA:FALSE\n"
                   "keyUsage = critical, digitalSignature, keyEncipherment\n"
                   "extendedKeyUsage = serverAuth\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)
    return {"ca_file": ca, "cert": cert, "key": key}


@contextlib.contextmanager
def start_lighttpd_git(workdir, tls, auth=True):
    # Debian ships lighttpd's TLS in a separate package; say so instead of
    # leaving "can't find module" buried in the error log.
    assert not tls or Path(MOD_OPENSSL).exists(), \
        f"{MOD_OPENSSL} missing: apt-get install lighttpd-mod-openssl"
    workdir = Path(workdir)
    (workdir / "htdocs").mkdir(parents=True, exist_ok=True)
    bare = init_bare(workdir / REPO_NAME, http=True)
    username, token = "inflight", secrets.token_hex(16)
    userfile = workdir / "htpasswd" if auth else None
    if auth:
        userfile.write_text(f"{username}:{token}\n")
    certs = make_tls_certs(workdir / "tls") if tls else None
    scheme = "https" if tls else "http"

    def start(port):
        conf = workdir / "lighttpd.conf"
        conf.write_text(lighttpd_conf(workdir, port, userfile, certs))
        error_log = workdir / "lighttpd-error.log"
        error_log.unlink(missing_ok=True)  # a lost port race must not look like this start
        process = ServerProcess([LIGHTTPD, "-D", "-f", conf], workdir / "lighttpd.log")
        # lighttpd logs "server started" after binding; the connect proves it.
        process.wait_ready(lambda: error_log.exists() and "server started" in error_log.read_text()
                           and port_open(port), "lighttpd", extra_logs=[error_log])
        return port, process

    port, process = start_on_free_port(start)
    path = f"127.0.0.1:{port}/git/{REPO_NAME}"
    ca_flags = ["--git-ca-file", str(certs["ca_file"])] if tls else []
    env = {"GIT_SSL_CAINFO": str(certs["ca_file"])} if tls else {}
    try:
        yield GitServer(
            kind=scheme, url=f"{scheme}://{path}", bare=bare,
            flags=["--git-username", username, "--git-token", token, *ca_flags],
            cli_url=f"{scheme}://{username}:{token}@{path}", env=env,
            wrong_flags=["--git-username", username, "--git-token", "wrong-" + token, *ca_flags],
            wrong_cli_url=f"{scheme}://{username}:wrong-{token}@{path}", wrong_env=env,
            port=port, log=workdir / "lighttpd-error.log", process=process,
            extra={"username": username, "token": token,
                   "ca_file": certs["ca_file"] if tls else None,
                   "cgi_log": workdir / "lighttpd-cgi-stderr.log"})
    finally:
        process.stop()


def start_http_git(workdir, auth=True):
    """git http-backend under lighttpd; without `auth`, anyone may fetch and push (the
    benchmarks): the credentials in the GitServer's flags are never asked for."""
    return start_lighttpd_git(workdir, tls=False, auth=auth)


def start_https_git(workdir):
    return start_lighttpd_git(workdir, tls=True)


# --------------------------------------------------------------------------
# sshd


def ssh_keygen(path, *args):
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-C", path.name, "-f", str(path), *args],
                   check=True, capture_output=True)
    return path


def sshd_config(workdir, port, host_key, authorized_keys):
    return f"""
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {workdir / 'sshd.pid'}
AuthorizedKeysFile {authorized_keys}
# The temp dir is not root-only; the keys in it are throwaway.
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
# The tests run as root, and git runs as the login user.
PermitRootLogin yes
# Accept SHA-1 RSA signatures too, so a failure with rsa_key is the client's doing.
PubkeyAcceptedAlgorithms +ssh-rsa
LogLevel VERBOSE
"""


def ssh_command(key, known_hosts, port):
    return (f"ssh -F /dev/null -i {key} -o IdentitiesOnly=yes -o BatchMode=yes"
            f" -o StrictHostKeyChecking=yes -o UserKnownHostsFile={known_hosts}"
            f" -o GlobalKnownHostsFile=/dev/null -p {port}")


@contextlib.contextmanager
def start_ssh_git(workdir):
    workdir = Path(workdir)
    keys = workdir / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    bare = init_bare(workdir / REPO_NAME)
    host_key = ssh_keygen(keys / "host_ed25519", "-t", "ed25519")
    key = ssh_keygen(keys / "client_ed25519", "-t", "ed25519")
    ecdsa_key = ssh_keygen(keys / "client_ecdsa", "-t", "ecdsa", "-b", "256")
    rsa_key = ssh_keygen(keys / "client_rsa", "-t", "rsa", "-b", "2048", "-m", "PEM")
    unauthorized_key = ssh_keygen(keys / "unauthorized_ed25519", "-t", "ed25519")
    authorized_keys = workdir / "authorized_keys"
    authorized_keys.write_text("".join(Path(f"{k}.pub").read_text()
                                       for k in (key, ecdsa_key, rsa_key)))

    def start(port):
        conf = workdir / "sshd_config"
        conf.write_text(sshd_config(workdir, port, host_key, authorized_keys))
        process = ServerProcess([SSHD, "-D", "-e", "-f", conf], workdir / "sshd.log")
        process.wait_ready(lambda: f"Server listening on 127.0.0.1 port {port}" in process.output(),
                           "sshd")
        return port, process

    port, process = start_on_free_port(start)
    host_pub = Path(f"{host_key}.pub").read_text().split()
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    command = ssh_command(key, known_hosts, port)
    try:
        yield GitServer(
            kind="ssh", url=f"ssh://root@127.0.0.1:{port}{bare}", bare=bare,
            flags=["--git-ssh-key", str(key), "--git-ssh-known-hosts", str(known_hosts)],
            env={"GIT_SSH_COMMAND": command},
            wrong_flags=["--git-ssh-key", str(unauthorized_key),
                         "--git-ssh-known-hosts", str(known_hosts)],
            wrong_env={"GIT_SSH_COMMAND": ssh_command(unauthorized_key, known_hosts, port)},
            port=port, log=process.log, process=process,
            extra={"key": key, "ecdsa_key": ecdsa_key, "rsa_key": rsa_key,
                   "unauthorized_key": unauthorized_key, "known_hosts": known_hosts,
                   "host_key_pub": Path(f"{host_key}.pub"), "ssh_command": command})
    finally:
        process.stop()
