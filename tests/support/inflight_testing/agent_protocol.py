"""The checkpoint agent's protocol version, read from the header both sides
build with, so that a test or a benchmark speaking to the agent directly
follows a version bump without an edit."""

import re
from pathlib import Path

_HEADER = (Path(__file__).resolve().parents[3] / "libcheckpoint" / "model" / "include" /
           "inflight" / "checkpoint" / "agent_protocol.hpp")

VERSION = int(re.search(r"kAgentProtocolVersion = (\d+);", _HEADER.read_text()).group(1))
