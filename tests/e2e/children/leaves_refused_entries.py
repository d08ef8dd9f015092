"""Beside its progress records, makes what a restore refuses (docs/checkpoints.md "What a checkpoint saves, a restore takes"): with --refused, a name that is not UTF-8, a directory
200 levels deep, a sparse file of --sparse-bytes, a FIFO, a socket and a
symlink; with --files N, N small files. Records test t001... every --test-ms up
to --tests, continuing from index.jsonl with --resume (which makes nothing)."""
import argparse
import json
import os
import socket
import time

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
parser.add_argument("--tests", type=int, required=True)
parser.add_argument("--test-ms", type=int, required=True)
parser.add_argument("--refused", type=int, default=0)
parser.add_argument("--sparse-bytes", type=int, default=0)
parser.add_argument("--files", type=int, default=0)
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()
os.chdir(args.output)  # the socket's path is relative: a run dir's may be too long for AF_UNIX

kept = []  # the bound socket, open while the child lives


def make_refused_entries():
    with open(b"bad\xff.txt", "w") as f:
        f.write("not UTF-8")
    deep = os.path.join("deep", *[f"d{n}" for n in range(1, 200)])
    os.makedirs(deep)
    with open(os.path.join(deep, "bottom.txt"), "w") as f:
        f.write("200 levels down")
    with open("sparse.bin", "wb") as f:
        f.truncate(args.sparse_bytes)
    os.mkfifo("pipe")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("sock")
    kept.append(server)
    os.symlink("/etc/passwd", "link")


def make_files():
    os.makedirs("files")
    for n in range(args.files):
        with open(os.path.join("files", f"f{n:04d}"), "w") as f:
            f.write("x")


if not args.resume:
    if args.refused:
        make_refused_entries()
    make_files()
    open("entries-made", "w").close()

done = set()
if os.path.exists("index.jsonl"):
    with open("index.jsonl") as f:
        done = {json.loads(line)["test_id"] for line in f if line.strip()}
with open("index.jsonl", "a") as f:
    for n in range(1, args.tests + 1):
        test_id = f"t{n:03d}"
        if test_id in done:
            continue
        time.sleep(args.test_ms / 1000)
        f.write(json.dumps({"test_id": test_id, "score": 1}) + "\n")
        f.flush()
