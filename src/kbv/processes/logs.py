"""A worker's stdout/stderr: drained from a pipe into a capped log file, and its tail for a
verdict's evidence."""

from __future__ import annotations

import os
import threading
from pathlib import Path


#: characters of a worker's log kept in a verdict's evidence (``log_tail``).
LOG_TAIL_CHARS = 4000
#: bytes of a candidate worker's stdout/stderr kept: the first LOG_HEAD_BYTES and the last
#: LOG_KEEP_BYTES - LOG_HEAD_BYTES; the rest is dropped (and counted), the worker never blocks on it.
LOG_KEEP_BYTES = 8 << 20
LOG_HEAD_BYTES = 1 << 20


class CappedLog:
    """Drains a pipe into ``path`` in a thread, keeping at most :data:`LOG_KEEP_BYTES`: the head,
    then a line naming what was dropped, then the tail (rewritten when the pipe closes).
    ``write_fd`` is the end to give the worker."""

    def __init__(self, path: Path, keep: int | None = None, head: int | None = None):
        keep = LOG_KEEP_BYTES if keep is None else keep
        head = LOG_HEAD_BYTES if head is None else head
        self.path, self.keep, self.head_bytes = Path(path), keep, min(head, keep)
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._lock = threading.Lock()
        r, self.write_fd = os.pipe()
        self._file = open(self.path, "wb")
        self._thread = threading.Thread(target=self._drain, args=(r,), name="kbv-candidate-log", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Bytes of output not kept."""
        return max(0, self.total - len(self._head) - len(self._tail))

    def note(self) -> str:
        """One line naming the cap when output was dropped, else ''."""
        if not self.dropped:
            return ""
        return (f"[kbv: the worker wrote {self.total / 2**20:.1f} MiB of output; kept the first "
                f"{self.head_bytes / 2**20:.0f} MiB and the last {(self.keep - self.head_bytes) / 2**20:.0f} MiB "
                f"(log cap {self.keep / 2**20:.0f} MiB), dropped {self.dropped / 2**20:.1f} MiB]")

    def _drain(self, fd: int) -> None:
        tail_cap = self.keep - self.head_bytes
        try:
            while chunk := os.read(fd, 1 << 16):
                with self._lock:
                    self.total += len(chunk)
                    room = self.head_bytes - len(self._head)
                    if room > 0:
                        self._head += chunk[:room]
                        self._file.write(chunk[:room])
                        self._file.flush()
                        chunk = chunk[room:]
                    if chunk:
                        self._tail += chunk
                        if len(self._tail) > tail_cap:
                            del self._tail[:len(self._tail) - tail_cap]
        finally:
            os.close(fd)
            with self._lock:
                self._write_all()

    def _write_all(self) -> None:
        try:
            self._file.seek(0)
            self._file.truncate()
            self._file.write(bytes(self._head))
            if self.dropped:
                self._file.write(("\n" + self.note() + "\n").encode())
            self._file.write(bytes(self._tail))
            self._file.close()
        except (OSError, ValueError):
            pass

    def tail(self, n: int = LOG_TAIL_CHARS) -> str:
        """The last ``n`` bytes of output kept (decoded), preceded by :meth:`note` when output was dropped."""
        with self._lock:
            kept = bytes(self._head) + bytes(self._tail) if not self.dropped else bytes(self._tail)
        text = kept[-n:].decode("utf-8", "replace")
        note = self.note()
        return f"{note}\n{text}" if note else text

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the writers to be gone (EOF) and write the file."""
        try:
            os.close(self.write_fd)
        except OSError:
            pass
        self._thread.join(timeout)


def _tail(path: Path, n: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
