// libgit2 1.5's socket stream sends each write as it comes: a push is two
// sends per object (its header, then its data), and the receiving
// index-pack wakes for every one of them. On 2 cores the two processes
// then take turns instead of working side by side. This stream gathers
// writes into sends of up to 64 KiB, and sends what it holds before each
// read (git's protocols answer only what was asked) and at close.
//
// SSH keeps libgit2's own stream: its transport reads the socket descriptor
// out of that stream's private struct.
#pragma once

#include <git2/sys/stream.h>

namespace inflight::checkpoint {

// One stream to host:port, not yet connected: what libgit2's registry
// creates when a batched stream is in use.
int open_batched_socket(git_stream** out, const char* host, const char* port);

// Makes the git:// and http(s):// connections opened from now on batched
// (`on`), or libgit2's own (`!on`, for SSH). The agent runs one operation
// at a time, so the choice is made at the start of each.
void use_batched_sockets(bool on);

}  // namespace inflight::checkpoint
