"""Channels relayed between a user's SSH client and their workspace's sshd.

A session channel (shell, command, subsystem such as sftp; with or without
a terminal) is relayed byte for byte in both directions, with stdout and
stderr kept apart, window changes, signals and breaks passed on, and the
exit status or signal returned. Each side's flow control holds the other:
when one side cannot take more, the gateway stops reading from the other,
so a 1 GB `scp` never sits in the gateway's memory.

A `direct-tcpip` channel (`ssh -L`) is opened by the workspace's sshd, so
its destination is reached from inside the workspace, never from the hub
host.

What the gateway itself says on a session (why it cannot relay, a start's
progress) is in the language of the client's locale where it sends one
(`LC_ALL`, `LC_MESSAGES` or `LANG`: OpenSSH's default `SendEnv LANG LC_*`),
else English.
"""

from __future__ import annotations

import asyncio
import logging

import asyncssh

from workspace import i18n

log = logging.getLogger("workspace.gateway")

CHUNK = 65536
# A channel's window until the workspace's side is open: what a client may send that the gateway has to
# hold meanwhile (a `+start` waits minutes). Once open, the channel gets the full window (`widen`).
PENDING_WINDOW = 32 << 10


def widen(chan, window: int) -> None:
    """Give a channel opened with PENDING_WINDOW its full receive window. asyncssh tops a channel's window
    up to its initial size once less than half of it is left: raising that size (asyncssh has no public
    call for it) makes the next top-up the full window."""
    if chan is not None and window > chan.get_recv_window():
        chan._init_recv_window = window


def locale_of(chan) -> str:
    """The locale a session's client asks for: its `LC_ALL`, `LC_MESSAGES` or `LANG` (the first set, as
    POSIX reads them), if it is one we have; else English (a forwarding, `chan` None, has none)."""
    env = (chan.get_environment() or {}) if chan is not None else {}
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if env.get(name):
            return i18n.from_tag(env[name]) or i18n.DEFAULT
    return i18n.DEFAULT


class _Upstream(asyncssh.SSHClientSession):
    """The workspace side of a relayed session: what sshd sends goes to the user."""

    def __init__(self, down: "SessionRelay"):
        self.down = down
        self.status: int | None = None
        self.exit_signal: tuple | None = None

    def data_received(self, data, datatype):
        self.down.chan.write(data, datatype)

    def eof_received(self):
        self.down.chan.write_eof()
        return True

    def exit_status_received(self, status):
        self.status = status

    def exit_signal_received(self, signal, core_dumped, msg, lang):
        self.exit_signal = (signal, core_dumped, msg, lang)

    def pause_writing(self):  # sshd's window is full: stop reading from the user
        self.down.chan.pause_reading()

    def resume_writing(self):
        self.down.chan.resume_reading()

    def connection_lost(self, exc):
        self.down.upstream_closed(self)


class SessionRelay(asyncssh.SSHServerSession):
    """The user's side of a session channel; `open` (a coroutine: the workspace's connection, or
    raise with a line for the user) is awaited when the client starts the session."""

    def __init__(self, open_upstream, window: int = PENDING_WINDOW):
        self.open_upstream = open_upstream
        self.window = window  # the channel's once the workspace's side is open
        self.chan = None
        self.up_chan = None
        self.term = None  # (type, size, modes) of a requested terminal
        self.request: dict = {}
        self.early: list[bytes] = []  # what the user sent before the workspace's side opened
        self.pending_eof = False
        self.task: asyncio.Task | None = None

    def connection_made(self, chan):
        self.chan = chan

    def pty_requested(self, term_type, term_size, term_modes):
        self.term = (term_type, term_size, term_modes)
        return True

    def shell_requested(self):
        return True  # the session starts; what the user sends waits for the workspace's side (data_received)

    def exec_requested(self, command):
        self.request["command"] = command
        return self.shell_requested()

    def subsystem_requested(self, subsystem):
        # the workspace's sshd decides which it offers (sftp)
        self.request["subsystem"] = subsystem
        return self.shell_requested()

    def session_started(self):
        self.task = asyncio.ensure_future(self._start())

    async def _start(self):
        locale = locale_of(self.chan)
        try:
            conn = await self.open_upstream(self.chan)
        except asyncssh.Error as e:
            self._fail(
                i18n.translate(
                    locale,
                    "the workspace's SSH server did not answer ({reason}); try again in a moment",
                    reason=e.reason or e,
                )
            )
            return
        except (OSError, asyncio.TimeoutError) as e:
            self._fail(
                i18n.translate(
                    locale, "the workspace's SSH server could not be reached ({error}); try again in a moment", error=e
                )
            )
            return
        except GatewayRefusal as e:
            self._fail(e.in_locale(locale))
            return
        env = {k: v for k, v in (self.chan.get_environment() or {}).items() if k == "LANG" or k.startswith("LC_")}
        term_type, term_size, term_modes = self.term or (None, None, None)
        try:
            self.up_chan, _ = await conn.create_session(
                lambda: _Upstream(self),
                command=self.request.get("command"),
                subsystem=self.request.get("subsystem"),
                env=env or None,
                request_pty=self.term is not None,
                term_type=term_type,
                term_size=term_size,
                term_modes=term_modes,
                encoding=None,
            )
        except asyncssh.ChannelOpenError as e:
            self._fail(i18n.translate(locale, "the workspace refused the session: {reason}", reason=e.reason))
            return
        for data in self.early:
            self.up_chan.write(data)
        self.early = []
        if self.pending_eof:
            self.up_chan.write_eof()
        widen(self.chan, self.window)
        self.chan.resume_reading()

    def _fail(self, line: str) -> None:
        if self.chan is not None:
            self.chan.write(f"{line}\r\n".encode(), asyncssh.EXTENDED_DATA_STDERR)
            self.chan.exit(1)

    def data_received(self, data, datatype):
        if self.up_chan is not None:
            self.up_chan.write(data)
        else:
            # the workspace's side is not open yet: keep this, and take no more until it is (paused here:
            # asyncssh resumes a channel once its session has started). What the client sends meanwhile
            # waits in the channel's buffer, within its small window (PENDING_WINDOW)
            self.early.append(data)
            self.chan.pause_reading()

    def eof_received(self):
        if self.up_chan is not None:
            self.up_chan.write_eof()
        else:
            self.pending_eof = True
        return True

    def terminal_size_changed(self, width, height, pixwidth, pixheight):
        if self.up_chan is not None:
            self.up_chan.change_terminal_size(width, height, pixwidth, pixheight)
        elif self.term is not None:
            self.term = (self.term[0], (width, height, pixwidth, pixheight), self.term[2])

    def signal_received(self, signal):
        if self.up_chan is not None:
            self.up_chan.send_signal(signal)

    def break_received(self, msec):
        if self.up_chan is not None:
            self.up_chan.send_break(msec)
            return True
        return False

    def pause_writing(self):  # the user's window is full: stop reading from the workspace
        if self.up_chan is not None:
            self.up_chan.pause_reading()

    def resume_writing(self):
        if self.up_chan is not None:
            self.up_chan.resume_reading()

    def upstream_closed(self, up: _Upstream) -> None:
        if up.exit_signal is not None:
            self.chan.exit_with_signal(*up.exit_signal)
        else:
            self.chan.exit(up.status if up.status is not None else 255)

    def connection_lost(self, exc):
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.up_chan is not None:
            self.up_chan.close()


class GatewayRefusal(Exception):
    """A reason the gateway cannot relay, in a line for the user (the workspace is not running, ...):
    `message` a literal marked `N_()` with named `{placeholders}` from `params`, as UserError's, said in
    the user's language by `in_locale`."""

    def __init__(self, message: str, **params):
        self.template, self.params = message, params
        super().__init__(message.format(**params) if params else message)

    def in_locale(self, locale: str) -> str:
        return i18n.translate(locale, self.template, **self.params)


def tunnel(open_upstream, host: str, port: int, window: int = PENDING_WINDOW):
    """A `direct-tcpip` handler (asyncssh's stream session): opened through the workspace's sshd; its
    channel gets `window` once that side is open."""

    async def handle(reader, writer):
        try:
            conn = await open_upstream(None)
            up_reader, up_writer = await conn.open_connection(host, port)
        except (GatewayRefusal, asyncssh.Error, OSError, asyncio.TimeoutError) as e:
            log.info("forwarding to %s:%s refused: %s", host, port, e)
            writer.close()
            return
        widen(writer.channel, window)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    return handle


async def _pump(reader, writer) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()  # the other side's window holds this one
        writer.write_eof()
    except (asyncssh.Error, OSError, BrokenPipeError):
        writer.close()
