"""``taskplug signal``: answer the gate nodes an execution waits on (flytekit's ``approve`` and
``wait_for_input``), as flytectl and the Flyte console do through flyteadmin's SignalService.

``list`` shows an execution's signals (each created when its gate started) and their values; ``set`` gives
one a value, read by the signal's type (``3`` for an INTEGER, ``true`` for a BOOLEAN, text as it is for a
STRING, JSON for a list or a map); ``approve`` and ``reject`` set an approve gate's BOOLEAN signal true or
false. A later value overwrites an earlier one, as SetSignal does.

The execution is read from the state DB a local ``taskplug run`` keeps (``--state-db``, default the config's
``executor.state-db``), or from a ``taskplug serve`` with ``--server URL`` (the API token of ``--token-file``
or ``$TASKPLUG_TOKEN``, as ``taskplug run --server`` sends it). Exit 0 when done, 2 for anything refused: an
unknown execution, a signal its gate has not created yet (the known ones are named), a value not of the
signal's type (the type is named).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click
from flyteidl.core import literals_pb2, types_pb2
from google.protobuf import json_format

from taskplug.cli._output import dump, handles_bad_input
from taskplug.core import SpecError, describe_type, literal_to_plain, plain_to_literal
from taskplug.executor import (
    EXECUTOR_SECTION,
    SIGNAL_NOT_FOUND,
    Platform,
    Signal,
    SignalError,
    SQLiteStateStore,
    check_state_file,
)

__all__ = ["parse_signal_value", "signal"]

_BOOLEAN: Final = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)


def parse_signal_value(
    text: str, literal_type: types_pb2.LiteralType, signal_id: str
) -> literals_pb2.Literal:
    """The command line's ``text`` as a value of the signal's type: a STRING takes the text as it is; any
    other type reads it as JSON first (``3``, ``true``, ``[1, 2]``, ``{"a": 1}``), else as text (a datetime,
    a duration such as ``1h``). :class:`SpecError` naming ``VALUE`` and the type when it is not one."""
    value: Any = text
    if not (
        literal_type.WhichOneof("type") == "simple" and literal_type.simple == types_pb2.SimpleType.STRING
    ):
        try:
            value = json.loads(text)
        except ValueError:
            value = text
    try:
        return plain_to_literal(value, literal_type, "VALUE")
    except SpecError as e:
        raise SpecError(
            "VALUE",
            f"not a value of signal {signal_id!r}'s type {describe_type(literal_type)}: {e.reason}",
        ) from None


def _view(signal: Signal) -> dict[str, Any]:
    return {
        "signal_id": signal.signal_id,
        "type": json_format.MessageToDict(signal.type),
        "type_name": describe_type(signal.type),
        "is_set": signal.value is not None,
        "value": None if signal.value is None else literal_to_plain(signal.value, signal.type),
    }


class _Local:
    """The state DB of local runs, opened only when it exists (a signal command never creates one)."""

    def __init__(self, path: Path, execution: str) -> None:
        if not path.is_file():
            raise SpecError(
                "--state-db",
                f"no state DB at {str(path)!r}: give the one the run used (--state-db), or --server URL for an "
                "execution on a `taskplug serve`",
            )
        check_state_file(path)
        self.store = SQLiteStateStore(path)
        try:
            self.key = self._key(path, execution)
        except BaseException:
            self.store.close()
            raise

    def _key(self, path: Path, execution: str) -> str:
        keys = [execution] if execution.count("/") == 3 else self.store.keys_named(execution)
        keys = [key for key in keys if self.store.load(key) is not None]
        if len(keys) == 1:
            return keys[0]
        if not keys:
            raise SpecError("EXECUTION", f"no execution {execution!r} in state DB {str(path)!r}")
        raise SpecError(
            "EXECUTION", f"{execution!r} names several executions ({', '.join(keys)}): give the whole key"
        )

    def signals(self) -> list[Signal]:
        return self.store.list_signals(self.key)

    def set(self, signal: Signal, value: literals_pb2.Literal) -> dict[str, Any]:
        record = self.store.load(self.key)
        if record is not None and record.terminal:
            # As the API answers 409: an ended execution's gates wait for nothing (SetSignal itself would
            # take the value, and nothing would read it).
            raise SpecError(
                "EXECUTION",
                f"execution {self.key!r} has already ended {record.outcome or 'its run'}: its gates wait for nothing",
            )
        self.store.set_signal(self.key, signal.signal_id, value)
        updated = next(s for s in self.signals() if s.signal_id == signal.signal_id)
        return _view(updated)

    def close(self) -> None:
        self.store.close()


class _Remote:
    """A ``taskplug serve``'s API."""

    def __init__(self, url: str, execution: str, token_file: Path | None) -> None:
        from taskplug.cli._remote_run import _Server, read_token

        token, source = read_token(token_file)
        self.server = _Server(url, token=token, token_source=source)
        self.key = execution
        self.path = "/executions/" + urllib.parse.quote(execution, safe="/") + "/signals"

    def signals(self) -> list[Signal]:
        """The signals' ids and types (their values are shown from the API's view: :meth:`views`)."""
        return [
            Signal(s["signal_id"], json_format.ParseDict(s["type"], types_pb2.LiteralType()))
            for s in self.views()
        ]

    def set(self, signal: Signal, value: literals_pb2.Literal) -> dict[str, Any]:
        plain = literal_to_plain(value, signal.type)
        path = f"{self.path}/{urllib.parse.quote(signal.signal_id, safe='')}"
        answer: dict[str, Any] = self.server.expect("POST", path, {"value": plain})
        return answer

    def views(self) -> list[dict[str, Any]]:
        return list(self.server.expect("GET", self.path))

    def close(self) -> None:
        pass


def _open(
    execution: str,
    state_db: Path | None,
    config_path: Path | None,
    server: str | None,
    token_file: Path | None,
) -> _Local | _Remote:
    if server is not None:
        if state_db is not None:
            raise SpecError("--state-db", "not with --server: the server's database holds the execution")
        return _Remote(server, execution, token_file)
    if token_file is not None:
        raise SpecError("--token-file", "only with --server: a state DB is read directly")
    path = state_db or Path(Platform.load(config_path).config.get(EXECUTOR_SECTION).state_db)
    return _Local(path, execution)


def _find(signals: list[Signal], signal_id: str | None, key: str, *, boolean: bool) -> Signal:
    """The signal ``signal_id`` names; for approve/reject without one, the execution's only BOOLEAN signal."""
    known = ", ".join(repr(s.signal_id) for s in signals) or "none yet: its gates have not started"
    if signal_id is None:
        candidates = [s for s in signals if s.type == _BOOLEAN] if boolean else []
        if len(candidates) == 1:
            return candidates[0]
        raise SpecError(
            "SIGNAL_ID",
            f"execution {key!r} has {len(candidates) or 'no'} approve signals: name one (known: {known})",
        )
    for s in signals:
        if s.signal_id == signal_id:
            return s
    raise SpecError(
        "SIGNAL_ID",
        f"execution {key!r} has no signal {signal_id!r}: its gate has not started yet (known: {known})",
    )


def _run(
    action: Callable[[_Local | _Remote], None],
    execution: str,
    state_db: Path | None,
    config_path: Path | None,
    server: str | None,
    token_file: Path | None,
) -> None:
    target = _open(execution, state_db, config_path, server, token_file)
    try:
        action(target)
    except SignalError as e:
        raise SpecError("SIGNAL_ID" if e.code == SIGNAL_NOT_FOUND else "VALUE", str(e)) from None
    finally:
        target.close()


_TARGET_OPTIONS: Final = [
    click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path)),
    click.option(
        "--state-db",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The state DB the run used [default: the config's executor.state-db, .taskplug/state.db].",
    ),
    click.option("--server", help="A `taskplug serve` URL: the execution runs on its replicas."),
    click.option(
        "--token-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="With --server: a file holding the API token to send (else $TASKPLUG_TOKEN, if set).",
    ),
]


def _target_options(command: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(_TARGET_OPTIONS):
        command = option(command)
    return command


@click.group()
def signal() -> None:
    """Answer the gate nodes an execution waits on: list its signals, set one, approve or reject.

    EXECUTION is the execution's key PROJECT/DOMAIN/NAME/NODE (or, in a state DB, its name alone)."""


@signal.command("list")
@click.argument("execution")
@_target_options
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def list_signals(
    execution: str,
    config_path: Path | None,
    state_db: Path | None,
    server: str | None,
    token_file: Path | None,
    fmt: str,
) -> None:
    """Print the execution's signals: id, type, and value once set."""

    def show(target: _Local | _Remote) -> None:
        views = target.views() if isinstance(target, _Remote) else [_view(s) for s in target.signals()]
        if fmt == "json":
            click.echo(dump(views), nl=False)
            return
        if not views:
            click.echo(f"execution {target.key} has no signals yet: its gates have not started")
            return
        width = max(len(v["signal_id"]) for v in views)
        for v in views:
            shown = json.dumps(v["value"]) if v["is_set"] else "(waiting)"
            click.echo(f"{v['signal_id']:<{width}}  {v['type_name']:<10}  {shown}")

    _run(show, execution, state_db, config_path, server, token_file)


def _setter(
    value_of: Callable[[Signal], literals_pb2.Literal], signal_id: str | None, *, boolean: bool
) -> Callable[[_Local | _Remote], None]:
    def set_it(target: _Local | _Remote) -> None:
        found = _find(target.signals(), signal_id, target.key, boolean=boolean)
        if boolean and found.type != _BOOLEAN:
            raise SpecError(
                "SIGNAL_ID",
                f"signal {found.signal_id!r} is of type {describe_type(found.type)}, not an approval: use "
                "`taskplug signal set`",
            )
        view = target.set(found, value_of(found))
        click.echo(f"signal {found.signal_id} of {target.key} set to {json.dumps(view['value'])}")

    return set_it


@signal.command("set")
@click.argument("execution")
@click.argument("signal_id")
@click.argument("value")
@_target_options
@handles_bad_input
def set_signal(
    execution: str,
    signal_id: str,
    value: str,
    config_path: Path | None,
    state_db: Path | None,
    server: str | None,
    token_file: Path | None,
) -> None:
    """Give a signal its value (read by the signal's type); it overwrites an earlier one."""
    setter = _setter(lambda s: parse_signal_value(value, s.type, s.signal_id), signal_id, boolean=False)
    _run(setter, execution, state_db, config_path, server, token_file)


def _approval(answer: bool) -> Callable[..., None]:
    verb = "approve" if answer else "reject"

    @click.argument("execution")
    @click.argument("signal_id", required=False)
    @_target_options
    @handles_bad_input
    def command(
        execution: str,
        signal_id: str | None,
        config_path: Path | None,
        state_db: Path | None,
        server: str | None,
        token_file: Path | None,
    ) -> None:
        value = plain_to_literal(answer, _BOOLEAN, "VALUE")
        _run(
            _setter(lambda _: value, signal_id, boolean=True),
            execution,
            state_db,
            config_path,
            server,
            token_file,
        )

    command.__doc__ = (
        f"{verb.capitalize()} an approve gate: set its BOOLEAN signal {str(answer).lower()} (SIGNAL_ID may be "
        "left out when the execution has one approve signal)."
    )
    return command


signal.command("approve")(_approval(True))
signal.command("reject")(_approval(False))
