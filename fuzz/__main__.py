"""``python -m fuzz list|run|replay|seeds`` (see :mod:`fuzz`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

WORK = Path(os.environ.get("PCAPTOOLS_FUZZ_WORK", "/tmp/pcaptools-fuzz"))
USAGE = __doc__ + "\n" + (sys.modules["fuzz"].__doc__ or "")


def _run(name: str, args: list[str]) -> None:
    """Coverage-guided fuzzing of one harness with atheris (never returns: libFuzzer exits)."""
    import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

    # atheris instruments Python bytecode: the compiled modules would give it no coverage
    os.environ["PCAPTOOLS_PURE"] = "1"
    with atheris.instrument_imports(include=["pcaptools"]):
        import pcaptools
        import pcaptools.protocols.dispatch
        import pcaptools.protocols.websocket  # noqa: F401

        from . import harnesses
    if name not in harnesses.HARNESSES:
        print(
            f"unknown harness {name!r}; one of: {', '.join(harnesses.HARNESSES)}", file=sys.stderr
        )
        raise SystemExit(2)
    target = harnesses.HARNESSES[name]
    corpus = WORK / "corpus" / name
    crashes = WORK / "crashes" / name
    crashes.mkdir(parents=True, exist_ok=True)
    if not corpus.is_dir() or not any(corpus.iterdir()):
        from .seeds import write_seeds

        write_seeds(WORK / "corpus")
    positional = [a for a in args if not a.startswith("-")]
    argv = [sys.argv[0], *args, f"-artifact_prefix={crashes}/"]
    if not any(a.startswith("-max_len=") for a in args):
        argv.append("-max_len=" + ("262144" if name in ("reader", "pipeline") else "16384"))
    if not positional:
        argv.append(str(corpus))
    atheris.Setup(argv, target)
    atheris.Fuzz()


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":  # before anything imports pcaptools: atheris must instrument it
        _run(rest[0] if rest else "", rest[1:])
        return 0  # not reached
    from . import harnesses

    if cmd == "list":
        print("\n".join(harnesses.HARNESSES))
        return 0
    if cmd == "seeds":
        from .seeds import write_seeds

        for name, d in write_seeds(rest[0] if rest else WORK / "corpus").items():
            print(f"{name}: {d}")
        return 0
    if cmd == "replay":
        target = harnesses.HARNESSES[rest[0]]
        for f in rest[1:]:
            p = Path(f)
            for q in sorted(p.iterdir()) if p.is_dir() else [p]:
                target(q.read_bytes())
                print(f"ok {q}")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
