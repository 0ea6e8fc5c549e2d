"""Files from the web, for `Tensor.from_url` and the datasets (`rulec.nn.datasets`): each is downloaded
once and kept in the user cache (`<cache root>/downloads`, see runtime/resources.py).

A file is known by its cache name: the name given, else the MD5 of its URL, with `.gunzip` when it is
stored unzipped. tinygrad 0.14 names its downloads the same way, so a file its `fetch` already keeps
(`$XDG_CACHE_HOME/tinygrad/downloads`, or `~/.cache/...`) is read from there rather than downloaded again:
a machine that ran a tinygrad script offline-ready runs it on rulec offline too. That folder is only read.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from rulec.runtime.resources import cache_root

_CHUNK = 1 << 16
TIMEOUT_S = 30


class FetchError(RuntimeError):
    """A download that failed: the URL, why, and where the file can be put by hand instead."""


def downloads_dir() -> Path:
    """Where rulec keeps what it downloads."""
    return cache_root() / "downloads"


def tinygrad_downloads_dir() -> Path:
    """tinygrad 0.14's download folder, read (never written) for files it already has."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinygrad" / "downloads"


def cache_name(url: str, name: str | None = None, gunzip: bool = False, headers: dict[str, str] | None = None) -> str:
    """The file name a download is kept under. Headers change what a server sends, so they are part of it."""
    base = name or hashlib.md5(url.encode("utf-8")).hexdigest()
    if headers:
        lines = "\n".join(f"{k.strip()}:{v.strip()}" for k, v in sorted(headers.items()))
        base += "_" + hashlib.md5(lines.encode("utf-8")).hexdigest()
    return base + (".gunzip" if gunzip else "")


def fetch(url: str, name: Path | str | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching: bool | None = None, headers: dict[str, str] | None = None, sha256: str | None = None,
          extract: bool = False) -> Path:
    """The local path of `url`'s contents, downloading them unless they are kept already.

    `url` may be a local path (starting with `/` or `.`): it is returned as is. `name` is the cache name
    (a path with a `/` is used as the file itself); `subdir` a folder inside the cache; `gunzip` stores the
    contents unzipped; `sha256` checks them (a kept file that does not match is downloaded again); `extract`
    unpacks a tar archive and returns its folder. `allow_caching=False` (or DISABLE_HTTP_CACHE=1) downloads
    even when the file is kept."""
    if url.startswith(("/", ".")):
        return Path(url)
    if allow_caching is None:
        allow_caching = not int(os.environ.get("DISABLE_HTTP_CACHE", "0") or 0)
    if name is not None and (isinstance(name, Path) or "/" in name):
        target, kept = Path(name), [Path(name)]
    else:
        rel = Path(subdir or "") / cache_name(url, name, gunzip, headers)
        target, kept = downloads_dir() / rel, [downloads_dir() / rel, tinygrad_downloads_dir() / rel]
    found = next((p for p in kept if allow_caching and p.is_file() and _matches(p, sha256)), None)
    if found is None:
        _download(url, target, gunzip, headers or {}, sha256)
        found = target
    return _extracted(found) if extract else found


def _matches(path: Path, sha256: str | None) -> bool:
    return sha256 is None or _sha256_of(path) == sha256


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, target: Path, gunzip: bool, headers: dict[str, str], sha256: str | None) -> None:
    """Into a temporary file beside `target`, renamed once complete and checked: a failed or interrupted
    download never leaves a partial file under the cache name."""
    import gzip  # here, not at the top: `import rulec.helpers` should not pay for an HTTP client
    import urllib.request

    target.parent.mkdir(parents=True, exist_ok=True)
    request = urllib.request.Request(url, headers={"User-Agent": "rulec", **headers})
    tmp = tempfile.NamedTemporaryFile(dir=target.parent, delete=False)
    try:
        with tmp, urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            source = gzip.GzipFile(fileobj=response) if gunzip else response
            h = hashlib.sha256()
            while chunk := source.read(_CHUNK):
                h.update(chunk)
                tmp.write(chunk)
        if sha256 is not None and h.hexdigest() != sha256:
            raise FetchError(f"fetch {url}: its contents have sha256 {h.hexdigest()}, not the expected {sha256}")
        os.replace(tmp.name, target)
    except (OSError, EOFError, ValueError) as e:  # urllib's URLError is an OSError; a bad gzip stream an OSError or EOFError
        reason = getattr(e, "reason", None) or e
        raise FetchError(f"fetch {url}: {reason}. Without network access, put the file"
                         f"{' (unzipped)' if gunzip else ''} at {target}") from e
    finally:
        Path(tmp.name).unlink(missing_ok=True)


def _extracted(archive: Path) -> Path:
    """A tar archive unpacked beside itself, once; members that would land outside the folder (absolute
    paths, `..`, links out) are refused by tarfile's `data` filter."""
    import tarfile

    folder = archive.parent / f"{archive.name}.extract"
    if folder.is_dir():
        return folder
    tmp = Path(tempfile.mkdtemp(dir=archive.parent))
    try:
        with tarfile.open(archive) as t:
            t.extractall(tmp, filter="data")
        os.replace(tmp, folder)
    except OSError:
        if not folder.is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
