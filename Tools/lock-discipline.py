#!/usr/bin/env python3
"""No I/O under a Mutex: fails when a `withLock` closure in Sources/ calls the store, the
network or a file.

A `Mutex` (`withLock`) guards state that is read and written in O(1): taking it never waits on
I/O. Work that must run one caller at a time across I/O (a store's transaction, a state file's
read-modify-write, a push) takes an `Exclusive` (`use`), whose doc comment states the order in
which exclusives are taken. This check reads each `withLock { … }` closure (braces matched,
strings and comments skipped) and reports the calls below in it, with file and line.

Usage: Tools/lock-discipline.py [ROOT]   (default: the package's Sources)
"""
import pathlib
import re
import sys

# Calls that reach a store, a file, a socket or a server, or hand work to code that may.
IO_CALLS = [
    # An HTTP request (ServerSync's); `HTTPStream.send` only queues bytes, in O(1).
    r"\b(Self|ServerSync)\.send\(", r"\bchangeFeed\(", r"\.apply\(", r"\bprefetch\(",
    r"\bfeature\(",
    r"\bSyncState\.(read|write)\(", r"\.fetch\w*\(", r"\.save\(", r"\bexecute\(",
    r"\bData\(contentsOf:", r"\.write\(to:", r"\brecv\(", r"\bconnect\(", r"\bURLSession\(",
    r"\.dataTask\(",
    r"\bStoreMonitor\(", r"\bTripStore\(", r"\bModelContainer\(", r"\bFileHandle\b",
]
PATTERN = re.compile("|".join(IO_CALLS))


def strip(source: str) -> str:
    """The source with comments and string literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
        elif source.startswith('"""', i):
            j = source.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
        elif source[i] == '"':
            j = i + 1
            while j < n and source[j] != '"' and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def closures(text: str):
    """(start, end) of each closure passed to `withLock`."""
    for match in re.finditer(r"\.withLock\s*(\(\s*)?\{", text):
        start = match.end() - 1
        depth = 0
        for k in range(start, len(text)):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    yield start, k
                    break


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent / "Sources")
    problems = set()
    for path in sorted(root.rglob("*.swift")):
        text = strip(path.read_text())
        for start, end in closures(text):
            for call in PATTERN.finditer(text, start, end):
                line = text.count("\n", 0, call.start()) + 1
                problems.add(f"{path}:{line}: '{call.group(0)}' inside a withLock closure")
    for problem in sorted(problems):
        print(problem)
    if problems:
        print(f"lock-discipline: {len(problems)} call(s) of I/O under a Mutex; take the state "
              "under the lock and do the I/O outside it, or use an Exclusive.")
        return 1
    print("lock-discipline: no I/O under a Mutex")
    return 0


if __name__ == "__main__":
    sys.exit(main())
