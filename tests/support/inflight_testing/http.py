"""HTTP to `inflight serve` (its API, probes and /metrics) with the stdlib only."""

import json
import urllib.error
import urllib.request


class Response:
    """Status, body text and headers of one answer, 4xx and 5xx included."""

    def __init__(self, status, body, headers):
        self.status = status
        self.body = body
        self.headers = headers

    def json(self):
        return json.loads(self.body)


def http(method, url, body=None, headers=None, timeout=10):
    """One request; `body` is bytes or a value sent as JSON. An error status is
    a Response too; a connection that fails raises OSError (URLError)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return Response(r.status, r.read().decode(), dict(r.headers))
    except urllib.error.HTTPError as e:
        return Response(e.code, e.read().decode(), dict(e.headers))


def metric(server, name):
    """The value of the unlabelled metric `name` on /metrics of anything with
    a get(path) that returns a Response (a Serve, a container's pod); None
    when it is not there."""
    for line in server.get("/metrics").body.splitlines():
        if line.split(" ")[0] == name:
            return float(line.split(" ")[1])
    return None
