"""A warm sandbox worker. Standard library only: it runs as ``python -I -S _worker.py``.

Why a separate clean interpreter: the training process has torch (threads, CUDA, GBs of
mappings) loaded; forking *that* per program is slow and unsafe. This worker is started
once, pre-imports the modules programs usually need, and then forks one child per job.
A ``code`` job runs in the forked child directly (no new interpreter: that is where the
speed-up comes from); an ``argv`` job ``exec``s.

Isolation of each child, in order:
- own session and process group; parent-death signal;
- network: the worker moved itself into a fresh, empty network namespace at start-up
  (loopback down, no routes). ``network=True`` jobs ``setns`` back to the host namespace;
- mount namespace per job: fresh tmpfs over /tmp, /var/tmp, /dev/shm and over any
  ``hide_paths``, so nothing outside the job directory is writable or those paths visible;
- rlimits: CPU, address space, file size, open files, processes, no core dumps;
- no-new-privileges, then every uid/gid dropped to this worker's *own* unprivileged uid
  (RLIMIT_NPROC is ignored for root, and a per-worker uid makes the process count exact
  and lets us kill every leftover process of a job with ``kill(-1)`` as that uid).

Protocol on stdin/stdout: 4-byte big-endian length + ``marshal`` (both ends are ours: the
pool and this worker; the program's output travels only as string values). The first
message the worker writes is ``{"ready": True, "isolation": {...}}``; then one result per
job.

Why so frugal with imports (no json, no shutil): every page the worker maps is page-table
work for each fork and exit, and json alone (re, enum) adds about a megabyte.
"""

import ctypes
import fcntl
import gc
import marshal
import os
import resource
import select
import signal
import struct
import sys
import time

# Modules programs commonly import; loading them once here makes every child start warm.
# Kept lean on purpose: every preloaded page makes each fork (the per-job cost) slower.
_PRELOAD = "math collections itertools functools heapq bisect".split()

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
UID_BASE, UID_SPAN = 231000, 4000
OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory")


def _rmtree(path):
    """Remove ``path`` and everything under it, never following a link a program planted
    (nor crossing into another filesystem)."""
    try:
        _remove_on_device(path, os.lstat(path).st_dev)
    except OSError:
        pass


def _remove_on_device(path, dev):
    """Delete ``path`` without ever leaving the filesystem ``dev``.

    Host paths the worker keeps visible (its interpreter or virtual environment, which may
    live under /tmp) are bind-mounted *inside* the private tmpfs; a plain rmtree of the
    tmpfs would walk into those binds and delete the host's files."""
    import stat as _stat

    try:
        st = os.lstat(path)
    except OSError:
        return
    if st.st_dev != dev:
        return
    if _stat.S_ISDIR(st.st_mode):
        try:
            names = os.listdir(path)
        except OSError:
            return
        for n in names:
            _remove_on_device(os.path.join(path, n), dev)
        try:
            os.rmdir(path)
        except OSError:
            pass
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


PRIVATE_TMPS = ("/tmp", "/var/tmp", "/dev/shm")  # fresh, writable, private per job
# Top-level directories a program may see (read-only to it: root-owned). Every other
# top-level directory (/work, /home, /root, /opt, /srv, /var, /run, ...) is covered by an
# empty tmpfs, so datasets, checkouts and secrets elsewhere are invisible. The
# interpreter's own installation, the job's workdir and ``expose_paths`` are bound back.
VISIBLE_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys", "tmp")


def _private_proc():
    """A fresh procfs over /proc in this mount namespace, in which a non-root uid sees only
    its own processes (``hidepid``): a program cannot read the trainer's or anyone else's
    command line or status. Returns what the job sees."""
    for option in ("hidepid=invisible", "hidepid=2"):  # the name since Linux 5.8, the number before
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, option)
            return "own processes only"
        except OSError as exc:
            err = exc
    return "all processes (%s)" % err


def _hidden_tops():
    out = []
    for n in sorted(os.listdir("/")):
        p = "/" + n
        if n not in VISIBLE_TOP and os.path.isdir(p) and not os.path.islink(p):
            out.append(p)
    return out

_libc = ctypes.CDLL(None, use_errno=True)
_exit = os._exit  # held here: a program may replace os._exit in its own process


def _check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _mount(src, target, fstype, flags, data=None):
    _check(
        _libc.mount(
            src.encode() if src else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        "mount %s" % target,
    )


def read_msg(fd):
    hdr = _read_exact(fd, 4)
    if hdr is None:
        return None
    (n,) = struct.unpack(">I", hdr)
    body = _read_exact(fd, n)
    return None if body is None else marshal.loads(body)


def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def write_msg(fd, obj):
    data = marshal.dumps(obj)
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


LOCK_DIR = "/tmp/evo-sandbox-uids"


def claim_uid(hint, lock_dir=LOCK_DIR):
    """A uid no other live sandbox on this host uses: (uid, lock fd). The flock is released
    when the fd closes or the holder dies, so uids of crashed workers come back."""
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    start = hint % UID_SPAN
    for i in range(UID_SPAN):
        uid = UID_BASE + (start + i) % UID_SPAN
        fd = os.open(os.path.join(lock_dir, "%d.lock" % uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return uid, fd
    raise RuntimeError("no free sandbox uid")


class Worker:
    def __init__(self, cfg):
        self.cfg = cfg
        self.isolation = {"warnings": []}
        self.host_net_fd = None
        self._lock_fd = None
        if os.geteuid() == 0:
            self.uid = self._claim_uid()
            self.gid = self.uid
        else:  # cannot switch users: run as ourselves (isolation degraded, and said so)
            self.uid, self.gid = os.getuid(), os.getgid()
        self.root = os.path.join(cfg.get("root", "/tmp/evo-sandbox"), "w%d" % self.uid)
        _rmtree(self.root)  # a dead predecessor's leftovers (we hold the uid lock)
        os.makedirs(self.root, exist_ok=True)
        os.chmod(os.path.dirname(self.root), 0o711)
        os.chmod(self.root, 0o711)
        self.counter = 0
        interp = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
        venv = os.path.dirname(os.path.dirname(sys.executable))  # -S: site never set sys.prefix
        if os.path.exists(os.path.join(venv, "pyvenv.cfg")):
            interp.add(venv)
        self.interpreter_paths = sorted({os.path.realpath(p) for p in interp} | {p for p in interp})
        self._setup()

    # -- start-up ------------------------------------------------------------------------
    def _claim_uid(self):
        uid, self._lock_fd = claim_uid(self.cfg.get("uid_hint", os.getpid()), self.cfg.get("lock_dir", LOCK_DIR))
        return uid

    def _setup(self):
        iso = self.isolation
        iso["uid"] = self.uid
        # Inherited by every child; the worker itself never execs, so it loses nothing.
        # (A setuid binary run by a program can then never regain root.)
        self.no_new_privs = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
        if os.geteuid() != 0:
            iso["warnings"].append("not root: cannot drop to a sandbox uid; process limit and kill-all are degraded")
        try:
            _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(SUBREAPER)")
            iso["subreaper"] = True
        except OSError as exc:
            iso["subreaper"] = False
            iso["warnings"].append("no child subreaper (%s): orphans are reaped by init" % exc)
        if self.cfg.get("netns", True):
            try:
                self.host_net_fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
                iso["network"] = "namespace"
            except OSError as exc:
                iso["network"] = "host"
                iso["warnings"].append("network isolation DEGRADED: %s; programs can reach the network" % exc)
        else:
            iso["network"] = "host"
        self.host_mnt_fd = self.priv_mnt_fd = None
        if self.cfg.get("mountns", True) and os.geteuid() == 0:
            try:
                iso["proc"] = self._worker_mounts()
                iso["mounts"] = "private"
                if iso["proc"] != "own processes only":
                    iso["warnings"].append("/proc shows other processes (command lines included): %s" % iso["proc"])
            except OSError as exc:
                iso["mounts"] = "host"
                iso["warnings"].append("filesystem isolation DEGRADED: %s; /tmp is shared with the host" % exc)
        else:
            iso["mounts"] = "host"
        for name in _PRELOAD:
            try:
                __import__(name)
            except Exception:
                pass
        os.environ.clear()
        os.environ.update(self.base_env())
        _prepare_python()
        # Return what start-up freed to the kernel: fewer resident pages, cheaper forks.
        _libc.malloc_trim(0)

    def base_env(self):
        return {
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONIOENCODING": "utf-8",
        }

    def _worker_mounts(self):
        """The fast path: this worker's own mount namespace, set up once, with private
        /tmp, /var/tmp, /dev/shm and /root, /home hidden. Plain jobs fork straight into
        it; after each job the private temp dirs are wiped. Jobs that need host paths
        (workdir / hide / expose) switch back to the host namespace and get one per job.
        Returns what a job sees in /proc."""
        self.host_mnt_fd = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        proc_view = self._private_mounts(None, (), ())
        self.priv_mnt_fd = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.priv_root = "/tmp/evo-jobs"
        os.makedirs(self.priv_root, exist_ok=True)
        os.chmod(self.priv_root, 0o711)
        return proc_view

    def _wipe_private_tmps(self):
        for top in PRIVATE_TMPS:
            try:
                dev = os.lstat(top).st_dev
                names = os.listdir(top)
            except OSError:
                continue
            for n in names:
                p = os.path.join(top, n)
                if p != self.priv_root:
                    _remove_on_device(p, dev)

    # -- one job -------------------------------------------------------------------------
    def run(self, job):
        argv0 = (job.get("argv") or [""])[0]
        needs_host = bool(
            job.get("workdir")
            or job.get("hide_paths")
            or job.get("expose_paths")
            # an absolute command this (private) namespace cannot see: bind it per job
            or (os.path.isabs(argv0) and not os.path.exists(argv0))
        )
        if self.priv_mnt_fd is None:  # no private namespace (switched off or refused)
            return self._run(job, self.root, per_job_mounts=self.isolation["mounts"] != "host")
        if not needs_host:
            try:
                return self._run(job, self.priv_root, per_job_mounts=False)
            finally:
                self._wipe_private_tmps()
        _check(_libc.setns(self.host_mnt_fd, CLONE_NEWNS), "setns(host mnt)")
        try:
            return self._run(job, self.root, per_job_mounts=True)
        finally:
            _check(_libc.setns(self.priv_mnt_fd, CLONE_NEWNS), "setns(private mnt)")

    def _run(self, job, root, per_job_mounts):
        t0 = time.monotonic()
        lim = job["limits"]
        self.counter += 1
        self.per_job_mounts = per_job_mounts
        own_dir = job.get("workdir") is None
        if own_dir:
            # root is ours alone (0711, per worker uid): a counter is a unique enough name.
            workdir = "%s/j%d" % (root, self.counter)
            if os.path.lexists(workdir):
                _rmtree(workdir)
            os.mkdir(workdir, 0o700)
        else:
            workdir = os.path.realpath(job["workdir"])
            if not os.path.isdir(workdir):
                return {"infra_error": "workdir does not exist: %s" % workdir}
            owner = os.stat(workdir)
        try:
            for rel, content in job.get("files", {}).items():
                path = os.path.join(workdir, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                # We write as root: never through a link a previous run planted in a workdir.
                real = os.path.realpath(os.path.dirname(path))
                if real != workdir and not real.startswith(workdir + "/"):
                    return {"infra_error": "refusing to write %r: its directory leaves the workdir" % rel}
                data = content["text"].encode() if "text" in content else _b64(content["b64"])
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            if own_dir and not job.get("files"):
                os.chown(workdir, self.uid, self.gid)
            else:
                _chown_tree(workdir, self.uid, self.gid)
            res = self._spawn(job, lim, workdir, t0)
            collected = {}
            for rel in job.get("collect", ()):
                path = os.path.join(workdir, rel)
                try:
                    if os.path.islink(path):
                        continue  # never follow a link the program planted
                    with open(path, "rb") as f:
                        collected[rel] = f.read(lim["output_bytes"]).decode("utf-8", "replace")
                except OSError:
                    pass
            res["files"] = collected
            return res
        finally:
            if own_dir:
                try:
                    os.rmdir(workdir)  # the common case: the program left nothing behind
                except OSError:
                    _rmtree(workdir)
            else:
                _chown_tree(workdir, owner.st_uid, owner.st_gid)

    def _spawn(self, job, lim, workdir, t0):
        rlimits = self._rlimit_plan(lim)
        stdin = job.get("stdin") or {"text": ""}
        stdin_data = stdin["text"].encode() if "text" in stdin else _b64(stdin["b64"])
        in_fd = os.memfd_create("stdin", 0)
        _write_all(in_fd, stdin_data)
        os.lseek(in_fd, 0, os.SEEK_SET)
        # stdout/stderr go to memory files, not pipes: nothing has to drain them while the
        # program runs (the worker just sleeps on the pidfd: every line of Python it runs
        # while the child lives costs copy-on-write faults), a program never blocks on a
        # full pipe, and a grandchild holding them open cannot stall us. Their size is
        # bounded by RLIMIT_FSIZE; we read back at most ``output_bytes``.
        out_fd = os.memfd_create("stdout", 0)
        err_fd = os.memfd_create("stderr", 0)
        st_r, st_w = os.pipe2(os.O_CLOEXEC)  # setup errors; closes on exec / before user code
        # Everything the worker holds goes to the permanent GC generation, so a collection
        # in the child never walks (and copy-on-write duplicates) the inherited heap.
        gc.freeze()
        # The children's std streams are installed in the worker: nothing the worker may
        # have written to them (to /dev/null here) may reach a program's output.
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            try:
                os.close(st_r)
                self._child(job, lim, rlimits, workdir, in_fd, out_fd, err_fd, st_w)
            finally:
                # Reached only if something escaped _exec_python's own exit (a program that
                # broke its error handling): never run worker code in the child.
                _exit(127)
        os.close(in_fd)
        os.close(st_w)
        try:
            return self._supervise(pid, lim, out_fd, err_fd, st_r, t0)
        finally:
            os.close(out_fd)
            os.close(err_fd)

    def _child(self, job, lim, rlimits, workdir, in_fd, out_w, err_w, st_w):
        try:
            os.setsid()
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if lim.get("network") and self.host_net_fd is not None:
                _check(_libc.setns(self.host_net_fd, CLONE_NEWNET), "setns(host net)")
            os.chdir(workdir)
            if self.per_job_mounts:
                self._private_mounts(workdir, job.get("hide_paths", ()), job.get("expose_paths", ()), _argv_paths(job.get("argv")))
            if job.get("cwd"):
                os.chdir(job["cwd"])
            os.dup2(in_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, st_w)  # close_range(2): everything inherited but the status pipe
            os.closerange(st_w + 1, 1 << 20)
            for which, soft_hard in rlimits:
                resource.setrlimit(which, soft_hard)
            if not self.no_new_privs:
                _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
            extra_env = job.get("env") or {}
        except BaseException as exc:  # setup failed: an infrastructure error, not the program's
            try:
                os.write(st_w, ("sandbox setup failed: %r" % (exc,)).encode())
            finally:
                os._exit(126)
        if job.get("argv"):
            argv = job["argv"]
            env = self.base_env()
            env.update(extra_env)
            try:
                os.execvpe(argv[0], argv, env)
            except OSError as exc:
                os.write(st_w, ("cannot execute %r: %s" % (argv[0], exc.strerror)).encode())
                os._exit(127)
        os.close(st_w)
        _exec_python(job["code"], extra_env)

    def _private_mounts(self, workdir, hide_paths, expose_paths, argv_paths=()):
        """Enter a new mount namespace with the host hidden (see VISIBLE_TOP); returns what
        a job sees in /proc."""
        _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        hidden = [(p, "0755") for p in (*_hidden_tops(), *hide_paths) if os.path.isdir(p)]
        hidden = [(os.path.realpath(p), mode) for p, mode in hidden] + [(p, "1777") for p in PRIVATE_TMPS]
        hidden.sort(key=lambda hm: hm[0].count("/"))  # parents first: /var before /var/tmp
        # Paths that must stay visible although under a hidden one: held open by fd,
        # which survives being mounted over, and bound back at their own path afterwards.
        wanted = [p for p in (workdir, *self.interpreter_paths, *expose_paths, *argv_paths) if p]
        keep = []
        for path in wanted:
            path = os.path.realpath(path)
            if os.path.exists(path) and any(path == h or path.startswith(h.rstrip("/") + "/") for h, _ in hidden):
                keep.append((path, os.open(path, os.O_PATH)))
        for path, mode in hidden:
            if not os.path.isdir(path):
                os.makedirs(path, exist_ok=True)  # e.g. /var/tmp inside the tmpfs over /var
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=" + mode)
        keep.sort(key=lambda pf: pf[0].count("/"))  # outer paths first
        for path, fd in keep:
            if os.path.exists(path):  # already visible through an outer bind
                os.close(fd)
                continue
            if os.path.isdir("/proc/self/fd/%d" % fd):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
            _mount("/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC)
            os.close(fd)
        proc_view = _private_proc()
        if workdir:
            os.chdir(workdir)
        return proc_view

    def _rlimit_plan(self, lim):
        """[(resource, (soft, hard))] for a job, computed before the fork (the child only
        applies it: less Python run after the fork, fewer pages copied)."""
        cpu = lim.get("cpu_seconds") or float(int(-(-lim["wall_seconds"] // 1)))
        cpu = max(1, int(-(-cpu // 1)))
        plan = [(resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_CORE, (0, 0))]
        if lim.get("memory_mb"):
            b = int(lim["memory_mb"]) << 20
            plan.append((resource.RLIMIT_AS, (b, b)))
        if lim.get("file_size_mb"):
            b = int(lim["file_size_mb"]) << 20
            plan.append((resource.RLIMIT_FSIZE, (b, b)))
        if lim.get("open_files"):
            n = int(lim["open_files"])
            plan.append((resource.RLIMIT_NOFILE, (n, n)))
        if lim.get("processes") and os.geteuid() == 0:  # as a shared user it would count the host's processes too
            n = int(lim["processes"])
            plan.append((resource.RLIMIT_NPROC, (n, n)))
        return plan

    def _supervise(self, pid, lim, out_fd, err_fd, st_r, t0):
        cap = int(lim["output_bytes"])
        deadline = t0 + float(lim["wall_seconds"])
        pidfd = os.pidfd_open(pid)
        timed_out = False
        setup_err = b""
        wait_on = [pidfd, st_r]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready = select.select(wait_on, [], [], left)[0]
            if pidfd in ready:
                break
            if st_r in ready:
                chunk = os.read(st_r, 4096)
                setup_err += chunk
                if not chunk:
                    wait_on = [pidfd]
        # Kill the job's whole process group, then everything else its uid still runs
        # (daemonised grandchildren that left the group), then reap.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _, status, ru = os.wait4(pid, 0)
        os.close(pidfd)
        # Every leftover descendant is re-parented to us (child subreaper), so "no children"
        # means nothing of the job survives; otherwise kill all of the job uid and reap.
        for attempt in range(200):
            if _reap_orphans():
                break
            self._kill_uid()
            time.sleep(min(0.05, 0.001 * attempt))
        if len(wait_on) > 1:
            try:
                os.set_blocking(st_r, False)
                setup_err += os.read(st_r, 4096)
            except OSError:
                pass
        os.close(st_r)
        out_size, err_size = os.fstat(out_fd).st_size, os.fstat(err_fd).st_size
        out_b, err_b = os.pread(out_fd, cap, 0), os.pread(err_fd, cap, 0)
        wall = time.monotonic() - t0
        stdout = out_b.decode("utf-8", "replace")
        stderr = err_b.decode("utf-8", "replace")
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        cpu = ru.ru_utime + ru.ru_stime
        cpu_limit = lim.get("cpu_seconds") or lim["wall_seconds"]
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and not timed_out and cpu >= int(-(-cpu_limit // 1))):
            timed_out = True
        tail = stderr[-2000:]
        oom = (not timed_out) and (exit_code != 0) and any(m in tail for m in OOM_MARKERS)
        infra = setup_err.decode("utf-8", "replace") or None
        return {
            "stdout": stdout,
            "stderr": stderr,
            "exit_code": exit_code,
            "signal": sig,
            "timed_out": timed_out,
            "oom": oom,
            "wall_time": wall,
            "cpu_time": cpu,
            "stdout_truncated": out_size > cap,
            "stderr_truncated": err_size > cap,
            "infra_error": infra,
        }

    def _kill_uid(self):
        """``kill(-1, SIGKILL)`` from a helper running as the job's uid: signals every
        process of that uid (the helper excepted), which catches daemonised leftovers."""
        if os.geteuid() != 0:
            return
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
                for _ in range(3):  # a fork bomb may race a single pass
                    os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def _prepare_python():
    """Objects every ``code`` child needs, built and installed once in the worker before
    any fork: each bit of Python the child runs costs copy-on-write page faults, the main
    per-job cost (swapping the std streams in each child cost ~70 faults, most of them
    freeing the interpreter's original stream objects).

    The worker itself never uses ``sys.std*`` (its protocol runs on raw descriptors, and
    0-2 are /dev/null in it), so installing them here changes nothing for it."""
    import builtins
    import io
    import types

    std = (
        io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace"),
        io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace", write_through=False),
        io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True),
    )
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    main.__file__ = "solution.py"
    _PY["std"], _PY["main"] = std, main
    _PY["replaced"] = (sys.stdin, sys.stdout, sys.stderr, sys.modules.get("__main__"))  # kept alive
    sys.stdin, sys.stdout, sys.stderr = std
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = std
    sys.argv = ["solution.py"]
    sys.modules["__main__"] = main
    # The first compile() of source text in a process builds the AST node types (about a
    # hundred classes); done here once, no child has to.
    compile("pass", "solution.py", "exec")


_PY = {}


def _exec_python(code, extra_env):
    """Run ``code`` as ``__main__`` in this (forked, already confined) process."""
    if extra_env:  # the worker holds the scrubbed base environment already
        os.environ.update(extra_env)
    if "std" not in _PY:
        _prepare_python()
    sys.path.insert(0, os.getcwd())
    main = _PY["main"]
    code_rc = 0
    try:
        exec(compile(code, "solution.py", "exec"), main.__dict__)
    except SystemExit as exc:
        c = exc.code
        if c is None:
            code_rc = 0
        elif isinstance(c, int):
            code_rc = c & 0xFF
        else:
            try:
                sys.stderr.write(str(c) + "\n")
            except Exception:
                pass
            code_rc = 1
    except BaseException as exc:
        try:  # drop our own frame: the program's traceback starts at solution.py
            import traceback

            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        except BaseException:  # no memory, or the program broke traceback: say what we can
            try:
                os.write(2, ("%s: %s\n" % (type(exc).__name__, exc)).encode("utf-8", "replace"))
            except BaseException:
                os.write(2, b"MemoryError\n")
        code_rc = 1
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    _exit(code_rc)


def _chown_tree(top, uid, gid):
    os.chown(top, uid, gid)
    for root, dirs, files in os.walk(top):
        for n in dirs + files:
            try:
                os.chown(os.path.join(root, n), uid, gid, follow_symlinks=False)
            except OSError:
                pass


def _argv_paths(argv):
    """An absolute ``argv[0]`` stays visible: the virtual environment it lives in (a
    ``pyvenv.cfg`` beside its bin/), else the file itself."""
    if not argv or not os.path.isabs(argv[0]):
        return ()
    env_root = os.path.dirname(os.path.dirname(argv[0]))
    if os.path.exists(os.path.join(env_root, "pyvenv.cfg")):
        return (env_root, os.path.realpath(argv[0]))
    return (os.path.realpath(argv[0]),)


def _reap_orphans():
    """Reap every exited child; True when no child at all is left (ECHILD), False while
    some still run."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _b64(s):
    import base64

    return base64.b64decode(s)


def main():
    cfg = marshal.loads(bytes.fromhex(sys.argv[1])) if len(sys.argv) > 1 else {}
    proto_in, proto_out = os.dup(0), os.dup(1)
    # Nothing we print by accident may corrupt the protocol stream.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    try:
        w = Worker(cfg)
    except BaseException as exc:
        write_msg(proto_out, {"ready": False, "error": repr(exc)})
        return
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    write_msg(proto_out, {"ready": True, "isolation": w.isolation, "pid": os.getpid()})
    def one(job):
        try:
            res = w.run(job)
        except BaseException as exc:
            res = {"infra_error": "worker error: %r" % (exc,)}
        res["isolation"] = w.isolation
        return res

    while True:
        msg = read_msg(proto_in)
        if msg is None:
            return
        if "batch" in msg:  # several jobs, one round trip (run_many): fewer wake-ups per job
            write_msg(proto_out, {"results": [one(job) for job in msg["batch"]]})
        else:
            write_msg(proto_out, one(msg))


if __name__ == "__main__":
    main()
