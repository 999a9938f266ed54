"""Upstream versions and stack specs: which release a version string or a name means.

:func:`resolve_upstream` maps an upstream torch-spyre version string (``0.0.1+g<sha>``, a dated
CI image tag ``release-2026-09-22``) to the release whose upstream state covers it;
:func:`resolve_stack` turns any stack spec (a release name, such a string, a user release
file, a :class:`~spyre_sim.catalogue.Release`) into a release.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import sys
import warnings

from spyre_sim.catalogue._catalogue import Catalogue
from spyre_sim.catalogue._loading import builtin_catalogue, load_release_file
from spyre_sim.catalogue._model import Release, StackResolution
from spyre_sim.errors import SpyreSimError, SpyreStackResolutionWarning, UnknownReleaseError
from spyre_sim.state import device_state

_GIT_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*\+g([0-9a-f]{7,40})(?:\.dirty)?$")


_PLAIN_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


_IMAGE_TAG = re.compile(r"^(release|nightly|weekly)-([0-9]{4})-([0-9]{2})-([0-9]{2})$")


_UNDATED_REVISION = re.compile(r"^release-[0-9]+\.[0-9]+$")


def resolve_upstream(spec: str, catalogue: Catalogue | None = None) -> StackResolution | None:
    """Map an upstream torch-spyre version string to the release that covers it, or return
    ``None`` when ``spec`` is not one (a release name or a file path).

    Accepted: ``0.0.1+g8068434`` (``torch_spyre.__version__`` since upstream PR #4120: the
    commit must be one the catalogue lists in a release's ``upstream.commits``) and dated CI
    image tags ``release-YYYY-MM-DD`` / ``nightly-YYYY-MM-DD`` / ``weekly-YYYY-MM-DD`` (the
    release whose upstream range contains the date; a date after the newest range resolves
    to the newest release, marked inexact). Other upstream forms (a bare ``0.0.1``, an
    unknown commit, an undated ``release-0.5``) raise :class:`SpyreSimError` saying why.
    """
    cat = catalogue if catalogue is not None else builtin_catalogue()
    git = _GIT_VERSION.match(spec)
    if git is not None:
        sha = git.group(1)
        found = cat.commit(sha)
        if found is None:
            known = ", ".join(
                f"{c.sha} ({r.name})"
                for r in cat.releases
                if r.upstream is not None
                for c in r.upstream.commits
            )
            raise SpyreSimError(
                f"upstream version {spec!r}: commit {sha} is not one the stack catalogue "
                f"knows (known commits: {known or 'none'}); give a dated image tag such as "
                "release-2026-09-22, or a release name: " + ", ".join(cat.names)
            )
        release, commit = found
        return _resolution(spec, "commit", commit.date, release, True, f"commit {commit.sha}")
    image = _IMAGE_TAG.match(spec)
    if image is not None:
        try:
            day = _dt.date(int(image.group(2)), int(image.group(3)), int(image.group(4)))
        except ValueError:
            raise SpyreSimError(f"image tag {spec!r} does not carry a valid date") from None
        covering = cat.covering(day)
        if covering is not None:
            return _resolution(spec, "image", day, covering, True, f"{image.group(1)} image")
        dated = [(r, r.upstream) for r in cat.releases if r.upstream is not None]
        if dated and day > dated[-1][1].end:
            return _resolution(spec, "image", day, dated[-1][0], False, f"{image.group(1)} image")
        first = dated[0][1].start.isoformat() if dated else "?"
        raise SpyreSimError(
            f"image tag {spec!r} predates every modelled upstream state (the first starts on "
            f"{first}); choose a release: " + ", ".join(cat.names)
        )
    if _UNDATED_REVISION.match(spec) and spec not in cat:
        raise SpyreSimError(
            f"upstream revision {spec!r} carries no date the catalogue can place; give a "
            "commit version (0.0.1+g<sha>), a dated image tag (release-2026-09-22) or a "
            "release name: " + ", ".join(cat.names)
        )
    if _PLAIN_VERSION.match(spec) and spec not in cat:
        raise SpyreSimError(
            f"upstream version {spec!r} names no commit (torch-spyre reports the same version "
            "for every build without a +g<sha> suffix); give torch_spyre.__version__ of a "
            "build that has one (0.0.1+g<sha>), a dated image tag, or a release name: "
            + ", ".join(cat.names)
        )
    return None


def _resolution(
    spec: str, kind: str, day: _dt.date, release: Release, exact: bool, what: str
) -> StackResolution:
    upstream = release.upstream
    assert upstream is not None
    text = (
        f"upstream {what} {spec!r} ({day.isoformat()}) resolved to stack release "
        f"{release.name} (upstream state {upstream.start.isoformat()}..{upstream.end.isoformat()})"
    )
    if not exact:
        text += (
            "; the date is after every modelled upstream state, so the newest release is "
            "used and later upstream changes are not modelled"
        )
    return StackResolution(spec, kind, day, release, exact, text)


def resolve_stack(spec: str | os.PathLike[str] | Release) -> Release:
    """A :class:`Release` from a built-in name (``"2026.05"``), an upstream version string
    (``"0.0.1+g8068434"``, ``"release-2026-09-22"``: see :func:`resolve_upstream`; a
    :class:`~spyre_sim.errors.SpyreStackResolutionWarning` says which release it became,
    once per string and process), the path of a user release TOML file (which extends a
    built-in one), or a :class:`Release` (returned as is)."""
    if isinstance(spec, Release):
        return spec
    catalogue = builtin_catalogue()
    if isinstance(spec, str) and not _looks_like_path(spec) and spec not in catalogue:
        resolution = resolve_upstream(spec, catalogue)
        if resolution is not None:
            _warn_resolution(resolution)
            return resolution.release
    if isinstance(spec, str) and not _looks_like_path(spec):
        try:
            return catalogue.release(spec)
        except UnknownReleaseError:
            if not os.path.isfile(spec):
                raise
    return _load_user_release_cached(os.fspath(spec))


def _warn_resolution(resolution: StackResolution) -> None:
    if resolution.spec in device_state.warned_resolutions:
        return
    device_state.warned_resolutions.add(resolution.spec)
    # attribute the warning to the caller's line, outside this package
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(resolution.message, SpyreStackResolutionWarning, stacklevel=level)


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or os.sep in spec


def _load_user_release_cached(source: str) -> Release:
    try:
        stat = os.stat(source)
    except OSError:
        return load_release_file(source)
    key = (os.path.abspath(source), stat.st_mtime_ns, stat.st_size)
    cached = device_state.user_releases.get(key)
    if cached is None:
        cached = load_release_file(source)
        device_state.user_releases[key] = cached
    return cached
