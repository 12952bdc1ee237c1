"""What one device call of make gpu-check brings back (tests/gpu_check.py, docs/gpu.md): the device
tool's limits on the return folder, and the driver's way of writing into it.

The tool brings back at most 8 files of 16 MiB, no more than 2 folders down, each name in letters,
digits, '.', '_' and '-'. The driver keeps there summary.txt and summary.json (the same rows),
speed.txt, tables.txt and logs.tar.gz (every log and metrics file of its work folder, each cut to
fit 12 MiB in all, no checkpoint, data or binary), each rewritten after every step to a temporary
name and renamed, so that a call stopped at its limit returns every row that finished.
"""
import io
import os
import re
import tarfile
import time

RETURN_FILES, RETURN_FILE_BYTES, RETURN_DEPTH = 8, 16 << 20, 2
RETURN_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
ARCHIVE_BYTES = 12 << 20  # the logs archive's own bound, under the tool's
ARCHIVED = (".log", ".txt", ".json", ".jsonl", ".out")  # what the archive keeps of the work folder
RETURNED = ("summary.txt", "summary.json", "speed.txt", "tables.txt", "logs.tar.gz")


def return_problems(folder):
    """What in `folder` a device call could not bring back, one line each (none: all of it comes back)."""
    problems, files = [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        depth = os.path.relpath(dirpath, folder).count(os.sep) + (dirpath != folder)
        for name in dirnames + filenames:
            if not RETURN_NAME.match(name):
                problems.append("%s: a name with characters other than letters, digits, '.', '_', '-'" % name)
        for name in filenames:
            path = os.path.join(dirpath, name)
            files.append(path)
            if depth > RETURN_DEPTH:
                problems.append("%s: more than %d folders down" % (os.path.relpath(path, folder), RETURN_DEPTH))
            if os.path.getsize(path) > RETURN_FILE_BYTES:
                problems.append("%s: %.1f MiB, over the 16 MiB a file" % (os.path.relpath(path, folder),
                                                                         os.path.getsize(path) / 2**20))
    if len(files) > RETURN_FILES:
        problems.append("%d files, over the %d that come back" % (len(files), RETURN_FILES))
    archive = os.path.join(folder, "logs.tar.gz")
    if os.path.exists(archive) and os.path.getsize(archive) > ARCHIVE_BYTES:
        problems.append("logs.tar.gz: %.1f MiB, over its 12 MiB" % (os.path.getsize(archive) / 2**20))
    return problems


def write(path, data):
    """data (text or bytes) into path, through a temporary name renamed over it"""
    tmp = path + ".part"
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.replace(tmp, path)


def archive(work):
    """logs.tar.gz's bytes: every log, table and metrics file of the work folder, each cut to its last
    `cap` bytes, the cap halved until the archive fits its 12 MiB."""
    cap = 2 << 20
    while True:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for dirpath, _, filenames in os.walk(work):
                for name in sorted(filenames):
                    path = os.path.join(dirpath, name)
                    if not name.endswith(ARCHIVED) or name.startswith(("summary.", "logs.tar")):
                        continue
                    data = open(path, "rb").read()
                    if len(data) > cap:
                        data = b"[the first %d bytes cut: the archive keeps %d]\n" % (len(data) - cap, cap) + \
                            data[-cap:]
                    info = tarfile.TarInfo(os.path.relpath(path, work))
                    info.size, info.mtime = len(data), int(time.time())
                    tar.addfile(info, io.BytesIO(data))
        if buffer.tell() <= ARCHIVE_BYTES or cap < 4096:
            return buffer.getvalue()
        cap //= 2


def publish(work, ret):
    """The return folder's copy of what the work folder holds of RETURNED; the problems that would keep
    any of the return folder from coming back."""
    for name in RETURNED:
        if os.path.exists(os.path.join(work, name)):
            write(os.path.join(ret, name), open(os.path.join(work, name), "rb").read())
    return return_problems(ret)
