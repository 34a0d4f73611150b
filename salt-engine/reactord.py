"""
reactord's Salt engine: runs runner and wheel reactions and render-time
execution-module calls inside the Salt master, as Salt's own reactor does,
for a reactord that runs on the master's host.

Salt's reactor runs a runner or wheel reaction in a thread of its own
process (``RunnerClient.low``/``WheelClient.low`` in a pool of
``reactor_worker_threads``), and a reaction file's ``salt['mod.fun']``
calls through the master's execution-module loader (``MasterMinion``).
This engine keeps the same three things and serves them on a local socket
to reactord's ``master`` driver; from outside the master, each runner
would cost a new process.

Configuration (the master's configuration, e.g. /etc/salt/master.d/reactord.conf)::

    engines_dirs:
      - /usr/share/reactord/salt-engine
    engines:
      - reactord:
          # all optional:
          socket: /var/run/salt/master/reactord.ipc   # default: sock_dir/reactord.ipc
          worker_threads: 10       # default: the master's reactor_worker_threads
          worker_processes: 2      # default: the host's cores, at most 4; 0 or 1: threads only
          salt_calls: read-only    # or a list of function globs
          manage: true             # salt-run reactor.* requests, handed to reactord

The socket is created mode 0600, owned by the master's user: only that
user and root reach it, and the engine also checks each peer's uid
(SO_PEERCRED). It takes three requests, each a msgpack frame as Salt's
IPC writes them (``{"head": {"id": N}, "body": {...}}``), and answers each
in a frame with the same id:

- ``{"kind": "runner", "low": CHUNK}`` and ``{"kind": "wheel", "low":
  CHUNK}``: a reaction's compiled low chunk, run through Salt's own
  ``ReactWrap.run`` (the same arguments, ``__user__: Reactor``, the same
  job events). At most ``worker_threads`` run at once, counted across
  the engine's worker processes (one count, kept by the engine's own
  process, which hands each job to the least busy worker process); past
  that a request waits for a free thread (none is dropped) and is
  answered once its job starts: ``{"jid": JID}``.
- ``{"kind": "call", "fun": NAME, "arg": [...], "kwarg": {...}}``: an
  execution function for a render, answered ``{"return": VALUE}``. Only
  the functions ``salt_calls`` allows (read-only ones by default).

- ``{"kind": "manage-wait", "wait": SECONDS}``: the next request of
  ``salt-run reactor.list|add|delete|is_leader|set_leader`` (see below),
  answered ``{"requests": [{"id": ID, "verb": VERB, "data": {...},
  "master": MASTER_ID}], "master": MASTER_ID}``, or ``{"requests": [],
  ...}`` when none came in ``wait`` seconds.
- ``{"kind": "manage-hello"}``: the master's id, ``{"master": ID,
  "manage": BOOL}``.
- ``{"kind": "manage-answer", "id": ID, "answer": {...}}``: reactord's
  answer to one of them, fired on the master's bus as Salt's reactor
  fires it; answered ``{"ok": true}``.

Anything else is refused, answered ``{"error": ...}`` and logged in the
master's log.

Salt's reactor runner fires ``salt/reactors/manage/VERB`` (inside its
job's tag, ``salt/run/JID/salt/reactors/manage/VERB``) with the master's
key and waits 30 s for the answer. The engine reads the master's bus,
checks the key as Salt's reactor does (a request without the master's key
is discarded and logged, never handed over: minions can fire events on
the bus, not reach this socket), and hands the request, without the key,
to the reactord that waits on ``manage-wait``. When no reactord takes or
answers it in ``MANAGE_DEADLINE`` seconds, the engine fires an answer
saying so, in the answer's shape.
"""

import collections.abc
import datetime
import fnmatch
import hmac
import logging
import multiprocessing
import os
import pickle
import queue
import socket
import struct
import sys
import threading
import time

import salt.minion
import salt.payload
import salt.runner
import salt.utils.cache
import salt.utils.event
import salt.utils.jid
import salt.utils.master
import salt.utils.msgpack
import salt.utils.process
import salt.utils.reactor
import salt.wheel

log = logging.getLogger(__name__)

__virtualname__ = "reactord"

# The functions a reaction file may call while rendering by default: they
# read and change nothing. reactord's --salt-calls read-only list; the Go
# test TestEngineReadOnlyListMatches keeps the two the same.
# BEGIN read-only
READ_ONLY = [
    "pillar.get", "pillar.item", "pillar.items", "pillar.raw", "pillar.keys",
    "grains.get", "grains.item", "grains.items", "grains.ls",
    "config.get", "config.option", "config.items",
    "file.file_exists", "file.directory_exists", "file.is_link", "file.stats", "file.get_hash",
    "mine.get", "test.ping", "test.echo", "test.version",
    "network.ip_addrs", "network.interfaces", "dnsutil.A", "dnsutil.AAAA",
    "match.glob", "match.compound", "match.list", "environ.get",
    "saltutil.runner:jobs.list_jobs", "saltutil.runner:jobs.list_job", "saltutil.runner:jobs.lookup_jid",
    "saltutil.runner:jobs.print_job", "saltutil.runner:jobs.exit_success",
    "saltutil.runner:manage.up", "saltutil.runner:manage.down", "saltutil.runner:manage.status",
    "saltutil.runner:manage.present", "saltutil.runner:manage.not_present", "saltutil.runner:manage.alived",
    "saltutil.runner:manage.not_alived", "saltutil.runner:manage.list_state",
    "saltutil.runner:pillar.show_pillar", "saltutil.runner:cache.grains", "saltutil.runner:cache.pillar",
    "saltutil.runner:cache.mine", "saltutil.wheel:key.list_all", "saltutil.wheel:key.finger",
]
# END read-only

SOCKET_NAME = "reactord.ipc"

# How long a salt-run reactor.* request waits for reactord's answer before
# the engine answers with an error (the runner waits 30 s).
MANAGE_DEADLINE = 20.0

# The requests of salt/runners/reactor.py, each with the tag of its answer.
MANAGE_ANSWERS = {
    "list": "salt/reactors/manage/list-results",
    "add": "salt/reactors/manage/add-complete",
    "delete": "salt/reactors/manage/delete-complete",
    "is_leader": "salt/reactors/manage/leader/value",
    "set_leader": "salt/reactors/manage/leader/value",
}

# Render-time calls running at once; more wait (reactord gives up on a
# call past its render's budget, and the engine then does not answer it).
CALLS_AT_ONCE = 16


def __virtual__():
    return __virtualname__


class RequestError(Exception):
    """A request the engine refuses or cannot run; its text is the answer."""


class _ClientCache(dict):
    """Salt's reactor's client cache (a CacheDict: a client is made again
    after reactor_refresh_interval), safe for the engine's many request
    threads where Salt's reactor has one: an entry expires only when
    populate_client_cache asks for it, under the lock, and reading it
    never raises KeyError once it was made."""

    def __init__(self, ttl):
        super().__init__()
        self.ttl = ttl
        self.made = {}
        self.lock = threading.RLock()

    def __contains__(self, key):
        with self.lock:
            made = self.made.get(key)
            if made is not None and time.monotonic() - made > self.ttl:
                del self.made[key]
                dict.__delitem__(self, key)
            return dict.__contains__(self, key)

    def __getitem__(self, key):
        with self.lock:
            return dict.__getitem__(self, key)

    def __setitem__(self, key, value):
        with self.lock:
            self.made[key] = time.monotonic()
            dict.__setitem__(self, key, value)


class _Wrap(salt.utils.reactor.ReactWrap):
    """Salt's reactor wrapper, with its thread pool replaced by the
    engine's: a runner or wheel reaction waits for a free thread instead of
    being dropped when the pool's queue is full."""

    def __init__(self, opts, engine):  # pylint: disable=super-init-not-called
        # ReactWrap.__init__ less its ThreadPool, whose queue drops work,
        # and with a client cache of its own, safe for threads.
        self.opts = opts
        self.client_cache = _ClientCache(opts["reactor_refresh_interval"])
        self.engine = engine
        self.local_state = threading.local()

    def populate_client_cache(self, low):
        with self.client_cache.lock:
            super().populate_client_cache(low)

    def runner(self, fun, **kwargs):
        return self._start("runner", fun, kwargs)

    def wheel(self, fun, **kwargs):
        return self._start("wheel", fun, kwargs)

    def _start(self, kind, fun, kwargs):
        client = self.client_cache[kind]
        # The jid the answer names: RunnerClient/WheelClient.low runs under
        # __jid__ (set here, past ReactWrap.run's checks of the arguments).
        kwargs["__jid__"] = self.local_state.jid
        try:
            self.engine.start_job(self.local_state.conn, kind, client.low, fun, kwargs)
        except RequestError as exc:
            # ReactWrap.run would log it as a failed reaction: keep it for
            # the answer instead.
            self.local_state.error = exc
            return None
        self.local_state.started = True
        return True


class Engine:
    """The engine's state: the clients, the loader, the pool's bound."""

    def __init__(self, opts, path, workers, calls, manage=None, pool=None):
        self.opts = opts
        self.manage = manage
        self.path = path
        self.workers = workers
        self.calls = calls
        # The one count of running jobs, for this process's threads and the
        # worker processes alike: a slot is taken here before a job is
        # handed out and given back when its worker says it ended.
        self.slots = threading.BoundedSemaphore(workers)
        self.pool = pool
        # The pool's threads are daemons, as Salt's reactor's: stopping the
        # master does not wait for a running orchestration.
        self.jobs = queue.SimpleQueue()
        for i in range(workers):
            threading.Thread(target=self._work, name=f"reactord-job-{i}", daemon=True).start()
        self.call_slots = threading.BoundedSemaphore(CALLS_AT_ONCE)
        self.running = 0
        self.waiting = 0
        self.waiting_logged = -60.0
        self.count_lock = threading.Lock()
        self.jid_lock = threading.Lock()
        self.last_jid = ""
        self.wrap = _Wrap(opts, self)
        self._mminion = None
        self.mminion_lock = threading.Lock()

    @property
    def mminion(self):
        with self.mminion_lock:
            if self._mminion is None:
                self._mminion = salt.minion.MasterMinion(self.opts)
            return self._mminion

    def gen_jid(self):
        """A jid as Salt writes them, never the same twice in this process
        (threads may ask in the same microsecond)."""
        with self.jid_lock:
            jid = salt.utils.jid.gen_jid(self.opts)
            stamp, sep, rest = jid.partition("_")
            if self.last_jid and stamp <= self.last_jid:
                last = datetime.datetime.strptime(self.last_jid, "%Y%m%d%H%M%S%f")
                stamp = f"{last + datetime.timedelta(microseconds=1):%Y%m%d%H%M%S%f}"
            self.last_jid = stamp
            return stamp + sep + rest

    def start_job(self, conn, kind, low_fn, fun, kwargs):
        """Run a kind job, fun with kwargs, once a slot is free: in a worker
        process when there are some, else low_fn(fun, kwargs) in a thread
        of this process; while waiting, give up if the requester hung up.
        The job's return is not printed on the master's standard output
        (print_event off, as Salt's orchestrate runs its steps): formatting
        it loads the outputters again for every job, a quarter of a
        runner's CPU here, and it goes to the event bus and the job cache
        as with Salt's reactor."""
        with self.count_lock:
            self.waiting += 1
        try:
            acquired = self.slots.acquire(blocking=False)
            if not acquired:
                self._note_waiting()
            while not acquired and not (acquired := self.slots.acquire(timeout=0.5)):
                if _hung_up(conn):
                    raise RequestError(
                        "the requester hung up while the reaction waited for a free thread: not run"
                    )
        finally:
            with self.count_lock:
                self.waiting -= 1
        if _hung_up(conn):
            self.slots.release()
            raise RequestError("the requester hung up before the reaction started: not run")
        with self.count_lock:
            self.running += 1

        def done():
            with self.count_lock:
                self.running -= 1
            self.slots.release()

        # A worker process takes it, or a standing thread here: no wait for
        # a new thread or process to start (the answer goes out at once;
        # the slot bounds what runs).
        if self.pool is not None and self.pool.submit(kind, fun, kwargs, done):
            return

        def run():
            try:
                low_fn(fun, kwargs, print_event=False)
            except Exception:  # pylint: disable=broad-except
                log.error("reactord engine: %s failed", fun, exc_info=True)
            finally:
                done()

        self.jobs.put(run)

    def _work(self):
        while True:
            self.jobs.get()()

    def _note_waiting(self):
        """Say, at most once a minute, that reactions wait for a thread."""
        now = time.monotonic()
        with self.count_lock:
            if now - self.waiting_logged < 60:
                return
            self.waiting_logged = now
            waiting, running = self.waiting, self.running
        log.info(
            "reactord engine: %d reaction(s) wait for a free thread (%d running, worker_threads %d, "
            "over %d worker process(es)); none is dropped",
            waiting,
            running,
            self.workers,
            self.pool.live() if self.pool is not None else 0,
        )

    def allowed(self, fun, args, kwargs):
        for pattern in self.calls:
            if fnmatch.fnmatchcase(fun, pattern):
                return True
        if fun in ("saltutil.runner", "saltutil.wheel"):
            name = args[0] if args else kwargs.get("name")
            if isinstance(name, str):
                return any(fnmatch.fnmatchcase(f"{fun}:{name}", p) for p in self.calls)
        return False

    def handle(self, conn, body):
        """Answer one request's body."""
        if not isinstance(body, dict):
            raise RequestError("a request is a map")
        kind = body.get("kind")
        if kind in ("runner", "wheel"):
            return self.react(conn, kind, body.get("low"))
        if kind == "call":
            return self.call(body.get("fun"), body.get("arg") or [], body.get("kwarg") or {})
        if kind == "manage-hello":
            return {"master": self.opts.get("id") or "", "manage": self.manage is not None}
        if kind in ("manage-wait", "manage-answer"):
            if self.manage is None:
                raise RequestError("salt-run reactor requests are off in this engine (its manage: option)")
            if kind == "manage-wait":
                return {"requests": self.manage.wait(conn, body.get("wait")), "master": self.opts.get("id") or ""}
            return self.manage.answer(body.get("id"), body.get("answer"))
        raise RequestError(f"unknown request {kind!r} (runner, wheel, call or manage-*)")

    def react(self, conn, kind, low):
        if not isinstance(low, dict) or low.get("state") != kind:
            raise RequestError(f"a {kind} request carries a {kind} reaction's low chunk")
        fun = low.get("fun")
        if not isinstance(fun, str) or not fun:
            raise RequestError("the reaction names no function")
        with self.wrap.client_cache.lock:
            self.wrap.populate_client_cache(low)
            client = self.wrap.client_cache[kind]
        if fun not in client.functions:
            raise RequestError(f"{kind} function {fun!r} is not available on this master")
        jid = self.gen_jid()
        state = self.wrap.local_state
        state.conn, state.jid, state.started, state.error = conn, jid, False, None
        self.wrap.run(low)  # Salt's own argument handling; logs its failures
        if state.error is not None:
            raise state.error
        if not state.started:
            raise RequestError(
                f"Salt's reactor wrapper did not start {kind} {fun!r}: its error is in the master's log"
            )
        return {"jid": jid}

    def call(self, fun, args, kwargs):
        if not isinstance(fun, str) or not isinstance(args, list) or not isinstance(kwargs, dict):
            raise RequestError("a call names a function, a list of arguments and a map of keyword arguments")
        if not self.allowed(fun, args, kwargs):
            raise RequestError(
                f"{fun} is not allowed while rendering (the engine's salt_calls: read-only functions by default)"
            )
        functions = self.mminion.functions
        if fun not in functions:
            raise RequestError(f"{fun!r} is not available on this master")
        with self.call_slots:
            return self._call(functions, fun, args, kwargs)

    @staticmethod
    def _call(functions, fun, args, kwargs):
        # Inside the loader's context: a function that returns one of its
        # dunders (config.items returns __opts__) is read there, where it
        # has a value, as Salt's reactor reads its own opts.
        return {"return": functions.run(lambda: _plain(functions[fun](*args, **kwargs)))}


# The frame a worker process sends once its clients are made (job numbers
# start at 1), and how long a worker started again may take to send it.
READY = 0
READY_WITHIN = 60


class _Child:
    """One worker process, as the engine's process sees it."""

    def __init__(self, index, proc, conn):
        self.index = index
        self.proc = proc
        self.conn = conn
        self.send_lock = threading.Lock()
        # job number -> [done callback, sent]; under the pool's lock
        self.running = {}
        self.alive = True
        # Jobs go to it once it said it is ready (its clients made): a
        # worker started again is forked from the engine's process while
        # its threads run, and may hang on a lock one of them held.
        self.ready = False


class _Pool:
    """The engine's worker processes. Each runs runner and wheel jobs with
    its own RunnerClient and WheelClient, made in it after the fork; the
    engine's process hands each job to the least busy one and keeps the
    one count of what runs (Engine.slots): a job's slot is given back when
    its worker says the job ended, or when the worker ends."""

    def __init__(self, opts, count, threads, path):
        self.opts = opts
        self.threads = threads
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0
        self.turn = 0
        self.children = []
        # All forked before any thread of the engine's runs.
        for index in range(count):
            self.children.append(self._spawn(index))
        for child in self.children:
            self._read_in_thread(child)

    def _spawn(self, index):
        """A new worker process (before the engine's threads run, or under
        self.lock)."""
        parent_end, child_end = multiprocessing.Pipe()
        # The worker closes its copies of the other workers' ends and of
        # its own: each sees its pipe end when the engine's process ends.
        inherited = [c.conn for c in self.children] + [parent_end]
        proc = _WorkerProcess(self.opts, child_end, inherited, self.threads, self.path, name=f"reactord-worker-{index}")
        proc.start()
        child_end.close()
        return _Child(index, proc, parent_end)

    def _read_in_thread(self, child):
        threading.Thread(target=self._read, args=(child,), name=f"reactord-worker-{child.index}-ends", daemon=True).start()

    def live(self):
        with self.lock:
            return sum(1 for c in self.children if c.alive and c.ready)

    def submit(self, kind, fun, kwargs, done):
        """Hand a job to a worker process; done() once it ended. False when
        no worker took it (it did not run: the caller runs it)."""
        try:
            payload = pickle.dumps((kind, fun, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # pylint: disable=broad-except
            log.warning("reactord engine: %s %s cannot go to a worker process: run in the engine's process", kind, fun, exc_info=True)
            return False
        with self.lock:
            live = [c for c in self.children if c.alive and c.ready]
            if not live:
                return False
            self.seq += 1
            number = self.seq
            # The least busy, the first in turn among equals.
            self.turn = (self.turn + 1) % len(live)
            child = min(live[self.turn:] + live[: self.turn], key=lambda c: len(c.running))
            entry = child.running[number] = [done, False]
        try:
            with child.send_lock:
                child.conn.send_bytes(struct.pack("!Q", number) + payload)
            sent = True
        except (OSError, ValueError):
            sent = False
        with self.lock:
            if not sent:
                child.running.pop(number, None)
                return False
            if child.running.get(number) is not entry:
                return True  # it ended already, and done() was called
            if child.alive:
                entry[1] = True
                return True
            del child.running[number]
        done()  # it went to a worker that ended meanwhile
        return True

    def _read(self, child):
        """Give back the slots of child's jobs as they end; when child
        ends, those of the jobs it was running, and start another."""
        while True:
            try:
                msg = child.conn.recv_bytes()
            except (EOFError, OSError):
                break
            (number,) = struct.unpack("!Q", msg[:8])
            if number == READY:
                with self.lock:
                    child.ready = True
                continue
            with self.lock:
                entry = child.running.pop(number, None)
            if entry is not None:
                entry[0]()
        with self.lock:
            child.alive = False
            lost = [n for n, e in child.running.items() if e[1]]
            dones = [child.running.pop(n)[0] for n in lost]
        for done in dones:
            done()
        child.conn.close()
        child.proc.join(5)
        log.error(
            "reactord engine: worker process %s (pid %s) ended (exit code %s) with %d job(s) running, "
            "which ended with it (not run again); starting another",
            child.index,
            child.proc.pid,
            child.proc.exitcode,
            len(dones),
        )
        time.sleep(1)  # not a fork a second, should it end at once again
        with self.lock:
            new = self.children[child.index] = self._spawn(child.index)
        self._read_in_thread(new)
        threading.Thread(target=self._watch_ready, args=(new,), name=f"reactord-worker-{new.index}-ready", daemon=True).start()

    def _watch_ready(self, child):
        """Kill a worker started again that is not ready in READY_WITHIN
        seconds (hung in the fork): _read then starts another. Its jobs
        meanwhile go to the other workers, or run in the engine's
        process."""
        time.sleep(READY_WITHIN)
        with self.lock:
            hung = child.alive and not child.ready
        if hung:
            log.error("reactord engine: worker process %s (pid %s) not ready after %d s; killing it", child.index, child.proc.pid, READY_WITHIN)
            child.proc.kill()


class _WorkerProcess(salt.utils.process.SignalHandlingProcess):
    """A worker process: runs the runner and wheel jobs the engine's
    process hands it, in standing threads, with clients of its own, and
    says when each ended. Salt's process class: its logging goes to the
    master's log, and the master's stopping stops it (its pipe's end too)."""

    def __init__(self, opts, conn, inherited, threads, path, **kwargs):
        super().__init__(**kwargs)
        self.opts = opts
        self.conn = conn
        self.inherited = inherited
        self.threads = threads
        self.path = path

    def run(self):
        for conn in self.inherited:
            conn.close()
        _close_engine_sockets(self.path, self.opts.get("sock_dir"))
        sys.setswitchinterval(0.005)  # Python's: nothing here answers requests
        # The clients of Salt's reactor's cache, made again after
        # reactor_refresh_interval as in the engine's process.
        wrap = _Wrap(self.opts, None)
        for kind in ("runner", "wheel"):
            wrap.populate_client_cache({"state": kind})
            getattr(wrap.client_cache[kind], "mminion", None)  # loaded now, not by the first job
        jobs = queue.SimpleQueue()
        send_lock = threading.Lock()

        def work():
            while True:
                number, kind, fun, kwargs = jobs.get()
                try:
                    with wrap.client_cache.lock:
                        wrap.populate_client_cache({"state": kind})
                        client = wrap.client_cache[kind]
                    client.low(fun, kwargs, print_event=False)
                except Exception:  # pylint: disable=broad-except
                    log.error("reactord engine: %s failed", fun, exc_info=True)
                finally:
                    try:
                        with send_lock:
                            self.conn.send_bytes(struct.pack("!Q", number))
                    except (OSError, ValueError):
                        pass  # the engine's process ended: so does this one, below

        for i in range(self.threads):
            threading.Thread(target=work, name=f"reactord-job-{i}", daemon=True).start()
        try:
            with send_lock:
                self.conn.send_bytes(struct.pack("!Q", READY))
        except (OSError, ValueError):
            return  # the engine's process ended
        log.info("reactord engine: worker process %s ready (pid %d, %d threads)", self.name, os.getpid(), self.threads)
        while True:
            try:
                msg = self.conn.recv_bytes()
            except (EOFError, OSError):
                log.info("reactord engine: worker process %s: the engine's process ended; exiting", self.name)
                return
            (number,) = struct.unpack("!Q", msg[:8])
            kind, fun, kwargs = pickle.loads(msg[8:])
            jobs.put((number, kind, fun, kwargs))


def _close_engine_sockets(path, sock_dir):
    """Close, in a worker process, the copies of the engine's listening
    socket and of its connections that the fork gave it (a connection a
    worker holds would not end when the engine closes it), and of its
    connections to the master's event sockets in sock_dir (a worker
    started again after one ended inherits the engine's subscription to
    the master's bus, which nothing would read)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    for name in names:
        try:
            fd = int(name)
            sock = socket.socket(fileno=fd)
        except (ValueError, OSError):
            continue
        ours = False
        try:
            if sock.family == socket.AF_UNIX:
                ours = sock.getsockname() == path
                if not ours and sock_dir:
                    peer = sock.getpeername()
                    ours = isinstance(peer, str) and os.path.dirname(peer) == os.path.normpath(sock_dir)
        except OSError:
            pass
        finally:
            sock.detach()
        if ours:
            # /dev/null in its place rather than a close: an object of the
            # engine's copied here may close the number later, which then
            # must not be a socket this process opened since.
            try:
                null = os.open(os.devnull, os.O_RDWR)
                try:
                    os.dup2(null, fd)
                finally:
                    os.close(null)
            except OSError:
                pass


class Manage:
    """The requests of salt-run reactor.*: read from the master's bus,
    checked against the master's key, handed to reactord over the
    socket, and answered on the bus in Salt's reactor's shape."""

    def __init__(self, opts):
        self.opts = opts
        self.cond = threading.Condition()
        self.queue = collections.deque()  # checked requests no reactord took yet
        self.pending = {}  # id -> (request, deadline): taken or not, not answered
        self.seq = 0

    def listen(self):
        """Read the master's bus until the master stops."""
        while True:
            try:
                with salt.utils.event.get_event(
                    "master", self.opts["sock_dir"], opts=self.opts, listen=True
                ) as bus:
                    while True:
                        ev = bus.get_event(wait=1, full=True)
                        self.expire()
                        if ev:
                            self.offer(ev.get("tag"), ev.get("data"))
            except Exception:  # pylint: disable=broad-except
                log.warning("reactord engine: reading the master's bus for salt-run reactor requests", exc_info=True)
                time.sleep(1)

    @staticmethod
    def verb(tag):
        """The request a tag carries (None for others, the answers too)."""
        if not isinstance(tag, str) or "salt/reactors/manage/" not in tag:
            return None
        for verb in MANAGE_ANSWERS:
            if tag.endswith("salt/reactors/manage/" + verb):
                return verb
        return None

    def offer(self, tag, data):
        """Queue a request whose key is the master's; discard others."""
        verb = self.verb(tag)
        if verb is None or not isinstance(data, dict):
            return
        key = salt.utils.master.get_master_key("root", self.opts)
        given = data.get("key")
        if not key or not isinstance(given, str) or not hmac.compare_digest(given.encode(), key.encode()):
            # Salt's reactor's words, and as it does: no answer.
            log.error(
                "received salt/reactors/manage event without matching master_key. discarding (reactord engine, tag %s)",
                tag,
            )
            return
        with self.cond:
            self.seq += 1
            rid = f"{os.getpid()}-{self.seq}"
            req = {
                "id": rid,
                "verb": verb,
                "data": {k: _plain(v) for k, v in data.items() if k != "key"},
                "master": self.opts.get("id") or "",
                "tag": tag,
            }
            self.queue.append(req)
            self.pending[rid] = (req, time.monotonic() + MANAGE_DEADLINE, time.monotonic())
            self.cond.notify_all()
        log.info("reactord engine: salt-run reactor.%s request handed to reactord (%s)", verb, rid)

    def wait(self, conn, seconds):
        """The next checked request, for a reactord waiting on conn; none
        after seconds, or when it hung up meanwhile."""
        end = time.monotonic() + max(0.0, min(float(seconds or 0), 60.0))
        with self.cond:
            while True:
                if _hung_up(conn):
                    return []
                if self.queue:
                    return [self.queue.popleft()]
                left = end - time.monotonic()
                if left <= 0:
                    return []
                self.cond.wait(min(left, 0.5))

    def answer(self, rid, answer):
        """Fire reactord's answer to request rid on the master's bus."""
        if not isinstance(answer, dict):
            raise RequestError("a manage-answer carries a map")
        with self.cond:
            item = self.pending.pop(rid, None)
        if item is None:
            raise RequestError(f"no salt-run reactor request {rid!r} waits for an answer (past its {MANAGE_DEADLINE:.0f} s?)")
        self.fire(MANAGE_ANSWERS[item[0]["verb"]], answer)
        log.info(
            "reactord engine: salt-run reactor.%s answered by reactord in %.3f s (%s)",
            item[0]["verb"],
            time.monotonic() - item[2],
            rid,
        )
        return {"ok": True}

    def expire(self):
        """Answer, with an error, the requests past their deadline."""
        now = time.monotonic()
        with self.cond:
            late = [rid for rid, (_, deadline, _) in self.pending.items() if deadline <= now]
            gone = [self.pending.pop(rid)[0] for rid in late]
            if gone:
                self.queue = collections.deque(r for r in self.queue if r["id"] not in late)
        for req in gone:
            why = (
                f"reactord did not answer salt-run reactor.{req['verb']} in {MANAGE_DEADLINE:.0f} s "
                "(is a reactord with --driver master connected to this master's reactord engine?)"
            )
            log.warning("reactord engine: %s", why)
            try:
                self.fire(MANAGE_ANSWERS[req["verb"]], self.error_answer(req["verb"], why))
            except Exception:  # pylint: disable=broad-except
                log.warning("reactord engine: firing an answer", exc_info=True)

    @staticmethod
    def error_answer(verb, why):
        """An answer saying why, where the runner reads it."""
        if verb in ("add", "delete"):
            return {"result": {"status": False, "comment": why}}
        if verb == "list":
            return {"reactors": why}
        return {"result": why}

    def fire(self, tag, data):
        with salt.utils.event.get_master_event(self.opts, self.opts["sock_dir"], listen=False) as bus:
            bus.fire_event(data, tag)


def _hung_up(conn):
    """Whether the peer closed its end (nothing else may arrive while a
    request is answered)."""
    try:
        conn.setblocking(False)
        try:
            data = conn.recv(1, socket.MSG_PEEK)
        finally:
            conn.setblocking(True)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return data == b""


def _plain(value):
    """value with what msgpack cannot carry written plainly: the loader's
    context objects in the master's opts (__pillar__, __grains__, ...),
    which have no value outside a loaded function, become None (salt.cmd
    config.items fails on them), other objects their text."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, collections.abc.Mapping):
        try:
            items = list(value.items())
        except Exception:  # pylint: disable=broad-except
            return None
        return {str(k): _plain(v) for k, v in items}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    try:
        return str(value)
    except Exception:  # pylint: disable=broad-except
        return None


def _frame(rid, answer):
    """One answer in Salt's framing."""
    try:
        return salt.payload.dumps({"head": {"id": rid}, "body": answer}, use_bin_type=True)
    except Exception:  # pylint: disable=broad-except
        pass
    try:
        return salt.payload.dumps({"head": {"id": rid}, "body": _plain(answer)}, use_bin_type=True)
    except Exception as exc:  # pylint: disable=broad-except
        log.error("reactord engine: cannot encode an answer", exc_info=True)
        return salt.payload.dumps({"head": {"id": rid}, "body": {"error": f"the answer cannot be encoded: {exc}"}}, use_bin_type=True)


def _peer_uid(conn):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return uid


def _serve_conn(engine, conn):
    uid = -1
    try:
        uid = _peer_uid(conn)
        refused = None
        if uid not in (0, os.getuid()):
            refused = f"uid {uid} may not use the reactord engine (root and the master's user only)"
            log.warning("reactord engine: refused a connection from uid %d (root and the master's user only)", uid)
        unpacker = salt.utils.msgpack.Unpacker(raw=False)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            unpacker.feed(data)
            for msg in unpacker:
                head = msg.get("head") if isinstance(msg, dict) else None
                rid = head.get("id") if isinstance(head, dict) else None
                body = msg.get("body") if isinstance(msg, dict) else None
                if refused:
                    conn.sendall(_frame(rid, {"error": refused}))
                    return
                try:
                    answer = engine.handle(conn, body)
                except RequestError as exc:
                    log.warning("reactord engine: refused a request from uid %d: %s", uid, exc)
                    answer = {"error": str(exc)}
                except Exception as exc:  # pylint: disable=broad-except
                    # Nothing was started: reactord may try again.
                    log.error("reactord engine: request failed", exc_info=True)
                    answer = {"error": f"{type(exc).__name__}: {exc}", "retry": True}
                if isinstance(body, dict) and body.get("kind") == "call" and _hung_up(conn):
                    return  # reactord gave up on it: no answer
                conn.sendall(_frame(rid, answer))
    except OSError as exc:
        log.debug("reactord engine: connection closed: %s", exc)
    except Exception:  # pylint: disable=broad-except
        log.warning("reactord engine: refused a malformed request from uid %d", uid, exc_info=True)
    finally:
        conn.close()


def _listen(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: no chmod, which a symlink could redirect
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def default_processes():
    """worker_processes by default: the host's cores (those this process
    may use), at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def start(socket=None, worker_threads=None, salt_calls="read-only", manage=True, worker_processes=None):  # pylint: disable=redefined-outer-name
    """The engine's entry point: serve reactord's master driver until the
    master stops."""
    opts = __opts__  # pylint: disable=undefined-variable
    path = socket or os.path.join(opts["sock_dir"], SOCKET_NAME)
    workers = int(worker_threads or opts.get("reactor_worker_threads") or 10)
    processes = default_processes() if worker_processes is None else int(worker_processes)
    processes = min(processes, workers)  # no more processes than jobs at once
    pool = None
    if processes > 1:
        if multiprocessing.get_start_method(allow_none=False) != "fork":
            # A worker process starts as a copy of this one: the engine's
            # module, which Salt's loader made, is not importable by name.
            log.warning(
                "reactord engine: worker_processes %d needs processes started by fork (this Python starts them by %s): "
                "runner and wheel reactions run in this process's threads",
                processes,
                multiprocessing.get_start_method(allow_none=False),
            )
        else:
            # First, before this process loads clients or starts threads.
            pool = _Pool(opts, processes, workers, path)
    if isinstance(salt_calls, str):
        salt_calls = [w.strip() for w in salt_calls.split(",") if w.strip()]
    calls = []
    for pattern in salt_calls or []:
        calls.extend(READ_ONLY if pattern == "read-only" else [pattern])
    # Requests are answered between the pool's busy threads: a shorter
    # switch interval than Python's 5 ms keeps an answer from waiting for
    # the interpreter lock behind ten running runners (this process only).
    sys.setswitchinterval(0.0005)
    engine = Engine(opts, path, workers, calls, Manage(opts) if manage else None, pool)
    # Load the runner and wheel functions now, as Salt's reactor does, so
    # that the pool's threads do not race to load them.
    for kind in ("runner", "wheel"):
        engine.wrap.populate_client_cache({"state": kind})
    engine.mminion  # pylint: disable=pointless-statement; loaded before the first render needs it
    server = _listen(path)
    if engine.manage is not None:
        threading.Thread(target=engine.manage.listen, name="reactord-manage", daemon=True).start()
    log.info(
        "reactord engine: listening on %s (runner and wheel reactions, %d at once, %s; render-time calls)",
        path,
        workers,
        f"over {processes} worker processes" if pool is not None else "in this process's threads",
    )
    while True:
        try:
            conn, _ = server.accept()
        except OSError as exc:
            log.warning("reactord engine: accepting a connection: %s", exc)
            time.sleep(0.1)
            continue
        threading.Thread(target=_serve_conn, args=(engine, conn), name="reactord-conn", daemon=True).start()
