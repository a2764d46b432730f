"""The seccomp program of the bwrap sandbox without network (issue 31 item 6): no new ``AF_UNIX`` sockets.

A socket file of the host (``docker.sock``, an ssh-agent, a local PostgreSQL, any listener) stays reachable
through the read-only view of ``/``: ``connect()`` on a socket file is not a write. A path-based filter
cannot be expressed in seccomp (the address is a pointer), so the program refuses the creation of every
``AF_UNIX`` socket with ``EACCES``, and the ``io_uring`` system calls that could create one behind seccomp's
back. ``socketpair()`` keeps working (pipes between processes of the command, asyncio's self-pipe,
libuv's stdio). What stops working inside such a sandbox: programs that listen on or connect to a unix
socket, including Python 3.14's ``multiprocessing`` default start method ``forkserver`` (use ``fork`` or
``spawn``, or allow the network, which lifts this filter with the network namespace).

:func:`unix_socket_filter` returns the compiled classic-BPF program (``struct sock_filter`` records, native
byte order) that bwrap loads with ``--seccomp FD``. It covers the native architecture and its compat ABIs
(x86_64 with i386 and x32, aarch64 with arm, riscv64); a process of any other architecture gets
``EACCES`` for every system call. ``None`` for an unsupported machine (the caller refuses to run).
"""

from __future__ import annotations

import errno
import platform
import struct

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_DENY = _RET_ERRNO | errno.EACCES

# struct seccomp_data offsets
_NR = 0
_ARCH = 4
_ARG0_LOW = 16 if struct.pack("=I", 1)[0] == 1 else 20

AF_UNIX = 1
_IO_URING = (425, 426, 427)  # io_uring_setup/enter/register: the same number on every architecture
_X32_BIT = 0x40000000
_SYS_SOCKET = 1  # socketcall(2)'s call number for socket()


class _Arch:
    def __init__(self, audit: int, socket: int, *, socketcall: int | None = None, x32: bool = False) -> None:
        self.audit = audit
        self.socket = socket
        self.socketcall = socketcall
        self.x32 = x32


_X86_64 = _Arch(0xC000003E, 41, x32=True)
_I386 = _Arch(0x40000003, 359, socketcall=102)
_AARCH64 = _Arch(0xC00000B7, 198)
_ARM = _Arch(0x40000028, 281, socketcall=102)
_RISCV64 = _Arch(0xC00000F3, 198)
_MACHINES: dict[str, tuple[_Arch, ...]] = {
    "x86_64": (_X86_64, _I386),
    "amd64": (_X86_64, _I386),
    "aarch64": (_AARCH64, _ARM),
    "arm64": (_AARCH64, _ARM),
    "riscv64": (_RISCV64,),
}


class _Program:
    """A tiny assembler: instructions with symbolic forward jump targets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.code):
            offsets = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self.labels[target] - index - 1
                if not 0 <= offset <= 255:
                    raise ValueError(f"BPF jump out of range at {index}")
                offsets.append(offset)
            out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
        return bytes(out)


def _arch_block(program: _Program, arch: _Arch, tag: str) -> None:
    program.label(tag)
    program.op(_LD_W_ABS, _NR)
    if arch.x32:
        program.op(_JGE_K, _X32_BIT, "deny", 0)
    program.op(_JEQ_K, arch.socket, f"{tag}_domain", 0)
    if arch.socketcall is not None:
        program.op(_JEQ_K, arch.socketcall, f"{tag}_socketcall", 0)
    for number in _IO_URING:
        program.op(_JEQ_K, number, "deny", 0)
    program.op(_RET_K, _RET_ALLOW)
    program.label(f"{tag}_domain")
    program.op(_LD_W_ABS, _ARG0_LOW)
    program.op(_JEQ_K, AF_UNIX, "deny", 0)
    program.op(_RET_K, _RET_ALLOW)
    if arch.socketcall is not None:  # socketcall(SYS_SOCKET, args): the domain is behind a pointer
        program.label(f"{tag}_socketcall")
        program.op(_LD_W_ABS, _ARG0_LOW)
        program.op(_JEQ_K, _SYS_SOCKET, "deny", 0)
        program.op(_RET_K, _RET_ALLOW)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The compiled program for ``machine`` (default: this one), ``None`` when it is not supported."""
    arches = _MACHINES.get((machine or platform.machine()).lower())
    if arches is None:
        return None
    program = _Program()
    program.op(_LD_W_ABS, _ARCH)
    for index, arch in enumerate(arches):
        program.op(_JEQ_K, arch.audit, f"arch{index}", 0)
    program.op(_RET_K, _DENY)
    for index, arch in enumerate(arches):
        _arch_block(program, arch, f"arch{index}")
    program.label("deny")
    program.op(_RET_K, _DENY)
    return program.assemble()
