"""An eval that resumes as agentv does and makes its model calls several at
once, for the chaos trials of the model path (test_model_chaos.py): a
SIGTERM catches calls in flight, and the next attempt asks the same
questions again, so that only inflight's journal keeps them from being paid
twice.

    model_eval.py --output DIR --cases N --workers W --stream 0|1
                  --prefix P [--retries R] [--resume]

The base URL and the key come from OPENAI_BASE_URL (ending in /v1) and
OPENAI_API_KEY, as OpenAI's SDKs take them. Case i is one chat call whose
last user message is "P/case-i". W threads share the cases, each over a
keep-alive connection of its own. A case ends when its answer is 200 and
whole (a stream to `data: [DONE]`); it is then appended to DIR/index.jsonl
as {"case": i, "answer": TEXT, "tries": [...]} in one write, flushed at
once. A try that fails (a status other than 200, a stream cut short, a
connection reset) is made again, up to R more times, as an SDK does: a
broken one on a new connection, an error status after the seconds of its
Retry-After. A case still failing after that is left out, and the eval
exits 1 once every thread is done.

--resume keeps the complete lines of index.jsonl (a torn last line is cut
off) and asks only the cases they lack; without it, index.jsonl is started
over and every case asked again, as by a tool with no resume of its own.
SIGTERM ends it at once (default disposition), whatever calls are in flight.
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from pathlib import Path


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


out = Path(arg("--output"))
cases = int(arg("--cases"))
workers = int(arg("--workers"))
stream = arg("--stream") == "1"
prefix = arg("--prefix")
retries = int(arg("--retries", "2"))
url = urllib.parse.urlsplit(os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions")
headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
           "Content-Type": "application/json"}
index_path = out / "index.jsonl"


def recorded_cases():
    """The cases of index.jsonl's complete lines; a torn last line is cut off."""
    if not index_path.exists():
        return set()
    text = index_path.read_text()
    whole = text[:text.rfind("\n") + 1]
    if whole != text:
        index_path.write_text(whole)
    return {json.loads(line)["case"] for line in whole.splitlines()}


def request_body(i):
    body = {"model": "fake-model", "messages": [
        {"role": "system", "content": "Answer the test case."},
        {"role": "user", "content": f"{prefix}/case-{i}"}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return json.dumps(body).encode()


def answer_of(raw):
    """The answer's text; ValueError for a stream without its end."""
    if not stream:
        return json.loads(raw)["choices"][0]["message"]["content"]
    text, ended = "", False
    for block in raw.decode().split("\n\n"):
        for line in block.split("\n"):
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                ended = True
            else:
                for choice in json.loads(data)["choices"]:
                    text += choice["delta"].get("content") or ""
    if not ended:
        raise ValueError("the stream ended without [DONE]")
    return text


lock = threading.Lock()
failed = []
if "--resume" in sys.argv:
    todo = sorted(set(range(cases)) - recorded_cases())
    index = open(index_path, "a")
else:  # a tool with no resume of its own starts its output over
    todo = list(range(cases))
    index = open(index_path, "w")


def wait_as_told(retry_after):
    """Sleeps the seconds of a Retry-After header before the next try, as
    OpenAI's SDKs do (up to a minute; an HTTP date is not read)."""
    try:
        time.sleep(min(max(float(retry_after), 0.0), 60.0))
    except (TypeError, ValueError):
        pass


def next_case():
    with lock:
        return todo.pop(0) if todo else None


def worker():
    conn = None
    while (i := next_case()) is not None:
        tries = []
        for _ in range(retries + 1):
            if conn is None:
                conn = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
            try:
                conn.request("POST", url.path, request_body(i), headers)
                response = conn.getresponse()
                raw = response.read()
                if response.status != 200:
                    tries.append(response.status)
                    wait_as_told(response.getheader("Retry-After"))
                    continue
                text = answer_of(raw)
            except (http.client.HTTPException, OSError, ValueError):
                tries.append("broken")
                conn.close()
                conn = None
                continue
            tries.append(200)
            with lock:
                index.write(json.dumps({"case": i, "answer": text, "tries": tries}) + "\n")
                index.flush()
            break
        else:
            with lock:
                failed.append(i)


threads = [threading.Thread(target=worker) for _ in range(workers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
sys.exit(f"cases failed after {retries} retries: {failed}" if failed else 0)
