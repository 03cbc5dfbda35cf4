"""Command templating (Flyte's core/template/template.go; its template_test.go as tables)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgpack
import pytest
from flyteidl.core import identifier_pb2, literals_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from taskplug.core import (
    PluginError,
    StaticInputReader,
    StaticOutputWriter,
    TaskExecutionID,
    TaskExecutionMetadata,
    TemplateParameters,
    format_literal,
    per_retry_unique_key,
    render_command,
)
from taskplug.core._templating import go_format_float

# -- literals --------------------------------------------------------------------------------------------


def prim(**kwargs: object) -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(**kwargs)))


def lit_str(s: str) -> literals_pb2.Literal:
    return prim(string_value=s)


def lit_int(i: int) -> literals_pb2.Literal:
    return prim(integer=i)


def lit_float(f: float) -> literals_pb2.Literal:
    return prim(float_value=f)


def lit_time(dt: datetime, nanos: int = 0) -> literals_pb2.Literal:
    ts = Timestamp(seconds=int(dt.timestamp()), nanos=nanos)
    return prim(datetime=ts)


def lit_list(*items: literals_pb2.Literal) -> literals_pb2.Literal:
    return literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=list(items)))


def literal_map(**values: literals_pb2.Literal) -> literals_pb2.LiteralMap:
    return literals_pb2.LiteralMap(literals=values)


# -- parameters ------------------------------------------------------------------------------------------


def metadata(
    generated_name: str = "per_retry_unique_key", namespace: str = "test-namespace"
) -> TaskExecutionMetadata:
    return TaskExecutionMetadata(
        task_execution_id=TaskExecutionID(generated_name, identifier_pb2.TaskExecutionIdentifier(), "n0"),
        namespace=namespace,
    )


@dataclass(frozen=True)
class FixedTaskReader:
    path: str = "s3://task-path"

    def read(self):  # pragma: no cover - not used by templating
        raise NotImplementedError


class BrokenTaskReader:
    @property
    def path(self) -> str:
        raise RuntimeError("cannot offload the task template")

    def read(self):  # pragma: no cover
        raise NotImplementedError


class BrokenInputReader:
    input_prefix = "input"
    input_path = "input/blah"

    def get(self) -> literals_pb2.LiteralMap | None:
        raise OSError("expected input fetch error")


@dataclass(frozen=True)
class Inputs:
    """An input reader with its own input path (StaticInputReader derives it from the prefix)."""

    inputs: literals_pb2.LiteralMap | None = None
    input_path: str = "input/blah"
    input_prefix: str = "input"

    def get(self) -> literals_pb2.LiteralMap | None:
        return self.inputs


OUT = StaticOutputWriter(output_prefix="output/blah", raw_output_prefix="s3://custom-bucket")


def params(
    inputs: literals_pb2.LiteralMap | None = None,
    *,
    out: StaticOutputWriter = OUT,
    task: object | None = None,
    meta: TaskExecutionMetadata | None = None,
) -> TemplateParameters:
    return TemplateParameters(
        metadata=meta or metadata(),
        inputs=Inputs(inputs),
        output_paths=out,
        task=task,  # type: ignore[arg-type]
    )


def render(args: list[str], p: TemplateParameters | None = None) -> list[str]:
    return render_command(args, p or params())


# -- placeholders ----------------------------------------------------------------------------------------


def test_empty_args_give_an_empty_list_even_without_readers() -> None:
    assert render_command([], TemplateParameters(metadata=metadata(), inputs=None, output_paths=None)) == []


@pytest.mark.parametrize(
    ("inputs", "out"),
    [(None, OUT), (Inputs(), None), (None, None)],
    ids=["no-inputs", "no-outputs", "neither"],
)
def test_missing_readers_are_an_error(inputs: Inputs | None, out: StaticOutputWriter | None) -> None:
    p = TemplateParameters(metadata=metadata(), inputs=inputs, output_paths=out)
    with pytest.raises(PluginError, match="input reader and output path cannot be nil"):
        render_command(["hello"], p)


def test_nothing_to_substitute() -> None:
    assert render(["hello", "world"]) == ["hello", "world"]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ .Input }}", "input/blah"),
        ("{{.Input}}", "input/blah"),
        ("{{ $Input }}", "input/blah"),
        ("{{ .input }}", "input/blah"),
        ("{{   .INPUT   }}", "input/blah"),
        ("{{ .InputPrefix }}", "input"),
        ("{{ .OutputPrefix }}", "output/blah"),
        ("{{ .outputprefix }}", "output/blah"),
        ("{{ .RawOutputDataPrefix }}", "s3://custom-bucket"),
        ("{{ $RawOutputDataPrefix }}", "s3://custom-bucket"),
        ("--switch {{ .rawOutputDataPrefix }}", "--switch s3://custom-bucket"),
        ("{{ .PerRetryUniqueKey }}", "per_retry_unique_key"),
        ("{{ .PerretryuNIqueKey }}", "per_retry_unique_key"),
        ("{{ .Namespace }}", "test-namespace"),
        ("{{.namespace}}", "test-namespace"),
        ("{{ .Input }} {{ .OutputPrefix }}", "input/blah output/blah"),
    ],
)
def test_placeholders_are_case_insensitive_with_dot_or_dollar_and_spaces(
    template: str, expected: str
) -> None:
    assert render([template]) == [expected]


def test_placeholders_match_with_unicode_case_folding_as_the_patterns_do() -> None:
    # A regular expression's case-insensitive match folds the long s and the Kelvin sign to ASCII letters,
    # which ``str.lower`` does not: text that is not ASCII is matched without any shortcut.
    assert render(["{{ .Name\u017fpace }} {{ .PerRetryUnique\u212aey }} \u00e9"]) == [
        "test-namespace per_retry_unique_key \u00e9"
    ]


def test_a_substituted_value_is_rendered_by_the_placeholders_after_it() -> None:
    out = StaticOutputWriter(output_prefix="s3://b/{{ .Namespace }}/{{ .PerRetryUniqueKey }}")
    assert render(["{{ .OutputPrefix }}", "{{ .Input }}"], params(out=out)) == [
        "s3://b/test-namespace/per_retry_unique_key",
        "input/blah",
    ]


@pytest.mark.parametrize(
    "template",
    ["${{input}}", "{{ .wrongOutputDataPrefix }}", "{{ Input }}", "{ .Input }", "{{ .Inputs.blah blah }}"],
)
def test_things_that_are_not_placeholders_are_left_alone(template: str) -> None:
    assert render([template]) == [template]


def test_bad_input_template_does_not_stop_other_substitutions() -> None:
    p = params(literal_map(arr=lit_str("x")))
    assert render(["--someArg {{ .Inputs.blah blah }} {{ .PerretryuNIqueKey }}"], p) == [
        "--someArg {{ .Inputs.blah blah }} per_retry_unique_key"
    ]


def test_previous_checkpoint_empty_is_two_quote_characters() -> None:
    out = StaticOutputWriter(output_prefix="o", checkpoint_prefix="s3://new-checkpoint/prefix")
    assert render(
        ["--prev={{ .PrevCheckpointPrefix }}", "--checkpoint={{ .CheckpointOutputPrefix }}"], params(out=out)
    ) == [
        '--prev=""',
        "--checkpoint=s3://new-checkpoint/prefix",
    ]


def test_checkpoints_are_substituted_case_insensitively() -> None:
    out = StaticOutputWriter(
        output_prefix="o",
        prev_checkpoint_prefix="s3://prev-checkpoint/prefix",
        checkpoint_prefix="s3://new-checkpoint/prefix",
    )
    assert render(
        ["--prev={{ .prevcheckpointprefix }}", "--checkpoint={{ .checkpointoutputprefix }}"], params(out=out)
    ) == [
        "--prev=s3://prev-checkpoint/prefix",
        "--checkpoint=s3://new-checkpoint/prefix",
    ]


def test_namespace_is_replaced_last_so_it_expands_inside_substituted_paths() -> None:
    out = StaticOutputWriter(
        output_prefix="output/blah",
        raw_output_prefix="s3://raw-data/prefix/{{ .Namespace }}",
        prev_checkpoint_prefix="s3://prev-checkpoint/prefix/{{ .Namespace}}",
        checkpoint_prefix="s3://new-checkpoint/prefix/{{.namespace}}",
    )
    assert render(
        [
            "--prev={{ .prevcheckpointprefix }}",
            "--checkpoint={{ .checkpointoutputprefix }}",
            "--raw-data-output={{ .rawoutputdataprefix }}",
        ],
        params(out=out),
    ) == [
        "--prev=s3://prev-checkpoint/prefix/test-namespace",
        "--checkpoint=s3://new-checkpoint/prefix/test-namespace",
        "--raw-data-output=s3://raw-data/prefix/test-namespace",
    ]


def test_namespace_is_expanded_inside_the_task_template_path() -> None:
    p = params(task=FixedTaskReader("s3://bucket/{{ .Namespace }}/task.pb"))
    assert render(["{{ .TaskTemplatePath }}"], p) == ["s3://bucket/test-namespace/task.pb"]


def test_input_values_are_used_verbatim_even_when_they_look_like_a_placeholder() -> None:
    # Go replaces the namespace before the inputs: a user's string is never rewritten.
    p = params(literal_map(x=lit_str("{{ .Namespace }}")))
    assert render(["{{ .Inputs.x }} {{ .Namespace }}"], p) == ["{{ .Namespace }} test-namespace"]


def test_task_template_path_is_substituted_when_present() -> None:
    p = params(task=FixedTaskReader())
    assert render(["hello", "{{ .perRetryUniqueKey }}", "{{ .taskTemplatePath }}"], p) == [
        "hello",
        "per_retry_unique_key",
        "s3://task-path",
    ]


def test_task_template_path_lookup_is_only_done_when_the_placeholder_is_present() -> None:
    p = params(task=BrokenTaskReader())
    assert render(["hello", "{{ .Input }}"], p) == ["hello", "input/blah"]


def test_task_template_path_lookup_error_is_an_error() -> None:
    p = params(task=BrokenTaskReader())
    with pytest.raises(RuntimeError, match="cannot offload"):
        render(["{{ .TaskTemplatePath }}"], p)


# -- per-retry key ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("generated_name", "key"),
    [
        ("per_retry_unique_key", "per_retry_unique_key"),
        ("per-retry-unique-key", "per_retry_unique_key"),
        ("r123abc-n0-0", "r123abc_n0_0"),
        ("9abc", "aabc"),
        ("123-abc", "aabc"),  # the whole leading run of non-letters becomes one "a"
        ("-_x", "a_x"),
        ("_x", "_x"),
        ("a.b/c d", "a_b_c_d"),
        ("a--..b", "a_b"),  # a run of disallowed characters becomes one "_"
    ],
)
def test_per_retry_unique_key_is_an_identifier_made_from_the_generated_name(
    generated_name: str, key: str
) -> None:
    assert per_retry_unique_key(generated_name) == key
    assert render(["{{ .PerRetryUniqueKey }}"], params(meta=metadata(generated_name))) == [key]


# -- inputs ----------------------------------------------------------------------------------------------


def test_inputs_collection_arg() -> None:
    p = params(literal_map(arr=lit_list(lit_str("a"), lit_str("b"))))
    assert render(
        ["hello", "--someArg {{ .Inputs.arr }}", "{{ .OutputPrefix }}", "{{ $RawOutputDataPrefix }}"], p
    ) == [
        "hello",
        "--someArg [a,b]",
        "output/blah",
        "s3://custom-bucket",
    ]


def test_inputs_nested_collection_arg() -> None:
    arr = lit_list(lit_list(lit_str("a"), lit_str("b")), lit_list(lit_int(1), lit_int(2)))
    assert render(["--someArg {{ .Inputs.arr }}"], params(literal_map(arr=arr))) == [
        "--someArg [[a,b],[1,2]]"
    ]


def test_inputs_date_is_rfc3339_with_nanoseconds() -> None:
    date = lit_time(datetime(1900, 1, 1, 1, 1, 1, tzinfo=UTC), nanos=1)
    assert render(["--someArg {{ .Inputs.date }}"], params(literal_map(date=date))) == [
        "--someArg 1900-01-01T01:01:01.000000001Z"
    ]


def test_multiple_inputs_in_one_string() -> None:
    inputs = literal_map(
        ds=lit_time(datetime(1900, 1, 1, 1, 1, 1, tzinfo=UTC), nanos=1),
        table=lit_str("my_table"),
        hr=lit_str("hr"),
        min=lit_int(15),
    )
    query = "SELECT * FROM hive.events.{{ .Inputs.table }} WHERE ds = '{{ .Inputs.ds }}' AND hr = '{{ .Inputs.hr }}' AND min = {{ .Inputs.min }}"
    assert render([query], params(inputs)) == [
        "SELECT * FROM hive.events.my_table WHERE ds = '1900-01-01T01:01:01.000000001Z' AND hr = 'hr' AND min = 15"
    ]


def test_input_placeholders_are_case_insensitive_but_names_are_not() -> None:
    p = params(literal_map(myInput=lit_int(3)))
    assert render(["{{ $inputs.myInput }}", "{{.INPUTS.myInput}}"], p) == ["3", "3"]
    with pytest.raises(PluginError, match="myinput"):
        render(["{{ .Inputs.myinput }}"], p)


def test_a_missing_input_fails_the_whole_render() -> None:
    p = params(literal_map(arr=lit_str("x")))
    with pytest.raises(PluginError, match=r"requested input is not found \[blah\]"):
        render(["hello", "--someArg {{ .Inputs.blah }}", "{{ .OutputPrefix }}"], p)


@pytest.mark.parametrize("inputs", [None, literal_map()], ids=["nil", "no-literals"])
def test_without_inputs_input_placeholders_are_left_untouched(inputs: literals_pb2.LiteralMap | None) -> None:
    p = params(inputs)
    assert render(
        ["--someArg {{ .Inputs.arr }}", "{{ .OutputPrefix }}", "--p {{ .rawOutputDataPrefix }}"], p
    ) == [
        "--someArg {{ .Inputs.arr }}",
        "output/blah",
        "--p s3://custom-bucket",
    ]


def test_an_input_read_error_is_an_error() -> None:
    p = TemplateParameters(metadata=metadata(), inputs=BrokenInputReader(), output_paths=OUT)
    with pytest.raises(OSError, match="expected input fetch error"):
        render_command(["{{ .Inputs.x }}"], p)


def test_static_input_reader_derives_its_input_path_from_the_prefix() -> None:
    p = TemplateParameters(
        metadata=metadata(), inputs=StaticInputReader(None, "s3://b/in/"), output_paths=OUT
    )
    assert render_command(["{{ .Input }}", "{{ .InputPrefix }}"], p) == ["s3://b/in/inputs.pb", "s3://b/in/"]


# -- literal formatting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        (lit_int(15), "15"),
        (lit_int(-3), "-3"),
        (prim(boolean=True), "true"),
        (prim(boolean=False), "false"),
        (lit_float(3.0), "3"),
        (lit_float(0.5), "0.5"),
        (lit_float(1e6), "1e+06"),
        (lit_float(123456.0), "123456"),
        (lit_float(1234567.0), "1.234567e+06"),
        (lit_float(0.0001), "0.0001"),
        (lit_float(0.00001), "1e-05"),
        (lit_float(-2.5), "-2.5"),
        (lit_float(1e21), "1e+21"),
        (lit_float(1e100), "1e+100"),
        (lit_float(0.1 + 0.2), "0.30000000000000004"),
        (lit_float(0.0), "0"),
        (lit_str("hello world"), "hello world"),
        (lit_str(""), ""),
        (lit_time(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)), "2024-05-06T07:08:09Z"),
        (lit_time(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC), nanos=500_000_000), "2024-05-06T07:08:09.5Z"),
        (lit_time(datetime(1900, 1, 1, 1, 1, 1, tzinfo=UTC), nanos=1), "1900-01-01T01:01:01.000000001Z"),
        (
            literals_pb2.Literal(
                scalar=literals_pb2.Scalar(blob=literals_pb2.Blob(uri="s3://bucket/file.csv"))
            ),
            "s3://bucket/file.csv",
        ),
        (
            literals_pb2.Literal(
                scalar=literals_pb2.Scalar(schema=literals_pb2.Schema(uri="s3://bucket/schema"))
            ),
            "s3://bucket/schema",
        ),
        (lit_list(lit_str("a"), lit_str("b")), "[a,b]"),
        (lit_list(lit_float(1.0), lit_float(2.5)), "[1,2.5]"),
        (lit_list(), "[]"),
    ],
)
def test_literals_are_formatted_as_go_prints_them(literal: literals_pb2.Literal, text: str) -> None:
    assert format_literal(literal) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"a": 1, "b": [1, 2]}, "map[a:1 b:[1 2]]"),
        ([1, "x", True], "[1 x true]"),
        (3.0, "3"),
        ("plain", "plain"),
    ],
)
def test_msgpack_binary_is_formatted_as_go_percent_v_of_the_decoded_value(value: object, text: str) -> None:
    literal = literals_pb2.Literal(
        scalar=literals_pb2.Scalar(binary=literals_pb2.Binary(value=msgpack.packb(value), tag="msgpack"))
    )
    assert format_literal(literal) == text


@pytest.mark.parametrize(
    "literal",
    [
        literals_pb2.Literal(map=literals_pb2.LiteralMap(literals={"a": lit_int(1)})),
        literals_pb2.Literal(scalar=literals_pb2.Scalar(none_type=literals_pb2.Void())),
        literals_pb2.Literal(
            scalar=literals_pb2.Scalar(binary=literals_pb2.Binary(value=b"x", tag="pickle"))
        ),
        literals_pb2.Literal(),
    ],
    ids=["map", "none", "binary-not-msgpack", "empty"],
)
def test_other_literals_cannot_be_formatted(literal: literals_pb2.Literal) -> None:
    with pytest.raises(PluginError):
        format_literal(literal)


def test_an_unformattable_input_fails_the_render() -> None:
    p = params(literal_map(m=literals_pb2.Literal(map=literals_pb2.LiteralMap())))
    with pytest.raises(PluginError):
        render(["{{ .Inputs.m }}"], p)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (-0.0, "-0"),
        (100000.0, "100000"),
    ],
)
def test_go_float_special_values(value: float, text: str) -> None:
    assert go_format_float(value) == text
