"""`SourceOptions.parse`: Spark's Kafka source options, checked when the query is defined.

Pure: nothing here imports pyspark or starts a session."""

from __future__ import annotations

import pytest

from pykraft.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    SourceOptions,
    parse_offsets,
)

BOOTSTRAP = "127.0.0.1:9291"
BASE = {"bootstrap.servers": BOOTSTRAP, "subscribe": "orders"}


def parse(*, batch: bool = False, drop: tuple[str, ...] = (), **extra: str) -> SourceOptions:
    """BASE plus `extra` (keys as given, any case) minus `drop`."""
    options = {k: v for k, v in BASE.items() if k not in drop}
    return SourceOptions.parse({**options, **extra}, batch=batch)


def raises_naming(option: str, options: dict[str, str], *, batch: bool = False) -> str:
    """The OptionError's message, after checking it names `option` (in any case)."""
    with pytest.raises(OptionError) as caught:
        SourceOptions.parse(options, batch=batch)
    message = str(caught.value)
    assert option.lower() in message.lower(), message
    return message


def test_option_error_is_a_value_error() -> None:
    assert issubclass(OptionError, ValueError)


# --- defaults and accepted spellings ---


def test_stream_defaults() -> None:
    options = parse()
    assert options == SourceOptions(bootstrap_servers=BOOTSTRAP, subscribe=("orders",))
    assert options.starting_offsets == "latest"
    assert options.ending_offsets == "latest"
    assert options.fail_on_data_loss is True
    assert options.include_headers is False
    assert options.group_id is None
    assert options.max_offsets_per_trigger is None
    assert options.min_partitions is None
    assert options.starting_timestamp is None


def test_batch_starts_at_earliest_by_default() -> None:
    assert parse(batch=True).starting_offsets == "earliest"
    assert parse(batch=True).ending_offsets == "latest"


@pytest.mark.parametrize("key", ["bootstrap.servers", "kafka.bootstrap.servers"])
def test_either_bootstrap_key_is_accepted(key: str) -> None:
    options = SourceOptions.parse({key: BOOTSTRAP, "subscribe": "t"}, batch=False)
    assert options.bootstrap_servers == BOOTSTRAP


def test_option_names_are_case_insensitive() -> None:
    options = SourceOptions.parse(
        {
            "Kafka.Bootstrap.Servers": BOOTSTRAP,
            "subscribePattern": "orders-.*",
            "startingOffsets": "EARLIEST",
            "maxOffsetsPerTrigger": "100",
            "minPartitions": "4",
            "failOnDataLoss": "False",
            "includeHeaders": " TRUE ",
            "startingTimestamp": "0",
        },
        batch=False,
    )
    assert options.subscribe_pattern == "orders-.*"
    assert options.starting_offsets == "earliest"
    assert options.max_offsets_per_trigger == 100
    assert options.min_partitions == 4
    assert options.fail_on_data_loss is False
    assert options.include_headers is True
    assert options.starting_timestamp == 0


def test_subscribe_splits_on_commas_and_drops_blanks() -> None:
    assert parse(subscribe=" a, b ,,c ").subscribe == ("a", "b", "c")


def test_assign_lists_each_partition() -> None:
    options = parse(drop=("subscribe",), assign='{"a": [0, 2], "b": [1]}')
    assert options.assign == (("a", 0), ("a", 2), ("b", 1))
    assert options.subscribe == ()
    assert options.subscribe_pattern == ""


def test_json_offsets_are_parsed_with_int_partitions() -> None:
    options = parse(
        batch=True,
        startingOffsets='{"orders": {"0": 23, "1": -2}}',
        endingOffsets='{"orders": {"0": 50, "1": -1}}',
    )
    assert options.starting_offsets == {"orders": {0: 23, 1: EARLIEST}}
    assert options.ending_offsets == {"orders": {0: 50, 1: LATEST}}


def test_empty_path_is_not_a_path() -> None:
    assert parse(path="").subscribe == ("orders",)


# --- group id ---


@pytest.mark.parametrize("key", ["group.id", "kafka.group.id"])
def test_group_id_is_taken_as_given(key: str) -> None:
    options = SourceOptions.parse({**BASE, key: "reporting"}, batch=False)
    assert options.group_id == "reporting"


def test_group_id_wins_over_group_id_prefix() -> None:
    given = {**BASE, "group.id": "reporting", "groupIdPrefix": "spark"}
    assert SourceOptions.parse(given, batch=False).group_id == "reporting"


def test_group_id_prefix_names_what_the_query_reads() -> None:
    assert parse(groupIdPrefix="spark", subscribe="a,b").group_id == "spark-a,b"
    by_pattern = parse(drop=("subscribe",), groupIdPrefix="spark", subscribePattern="o.*")
    assert by_pattern.group_id == "spark-o.*"
    by_assign = parse(drop=("subscribe",), groupIdPrefix="spark", assign='{"a":[0,1]}')
    assert by_assign.group_id == "spark-a:0,a:1"


def test_group_id_from_prefix_is_stable() -> None:
    first = parse(groupIdPrefix="spark").group_id
    assert first is not None
    assert parse(groupIdPrefix="spark").group_id == first


# --- wants ---


def test_pattern_wants_full_matches_and_no_internal_topics() -> None:
    options = parse(drop=("subscribe",), subscribePattern=".*")
    assert options.wants("orders")
    assert not options.wants("__consumer_offsets")
    assert not options.wants("__transaction_state")
    narrow = parse(drop=("subscribe",), subscribePattern="ord")
    assert not narrow.wants("orders")  # a full match, as Java's Pattern.matches
    assert parse(drop=("subscribe",), subscribePattern="ord.*").wants("orders")


def test_subscribe_wants_only_its_topics() -> None:
    options = parse(subscribe="a,__internal")
    assert options.wants("a")
    assert options.wants("__internal")  # named outright: taken
    assert not options.wants("b")


def test_assign_wants_no_topic_by_name() -> None:
    assert not parse(drop=("subscribe",), assign='{"a":[0]}').wants("a")


# --- errors: each names its option ---


def test_unknown_options_are_all_listed() -> None:
    message = raises_naming(
        "subscrbe", {**BASE, "subscrbe": "x", "kafka.linger.ms": "5", "maxOffsetPerTrigger": "1"}
    )
    assert "kafka.linger.ms" in message
    assert "maxoffsetpertrigger" in message
    assert "known:" in message
    assert "subscribepattern" in message.split("known:")[1]


def test_unknown_option_fails_before_anything_else() -> None:
    # No bootstrap and no subscription either: the typo is what gets reported.
    raises_naming("typo", {"typo": "1"})


def test_bootstrap_servers_is_required() -> None:
    raises_naming("bootstrap.servers", {"subscribe": "t"})
    raises_naming("bootstrap.servers", {"bootstrap.servers": "", "subscribe": "t"})


@pytest.mark.parametrize(
    ("chosen", "got"),
    [
        ({}, ""),
        ({"subscribe": "a", "subscribePattern": "a.*"}, " (got subscribe, subscribepattern)"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, " (got subscribe, assign)"),
        ({"subscribePattern": "a.*", "assign": '{"a":[0]}'}, " (got subscribepattern, assign)"),
        (
            {"subscribe": "a", "subscribePattern": "a.*", "assign": '{"a":[0]}'},
            " (got subscribe, subscribepattern, assign)",
        ),
        # An empty value is not a choice.
        ({"subscribe": "", "assign": ""}, ""),
    ],
)
def test_exactly_one_subscription_kind(chosen: dict[str, str], got: str) -> None:
    message = raises_naming("subscribePattern", {"bootstrap.servers": BOOTSTRAP, **chosen})
    assert message == "give exactly one of subscribe, subscribePattern and assign" + got


def test_subscribe_with_no_topic() -> None:
    raises_naming("subscribe", {**BASE, "subscribe": " , "})


def test_bad_regex_is_named() -> None:
    options = {"bootstrap.servers": BOOTSTRAP, "subscribePattern": "orders-(["}
    message = raises_naming("subscribePattern", options)
    assert "orders-([" in message


@pytest.mark.parametrize(
    "assign", ["[0, 1]", "not json", '{"a": 0}', '{"a": [-1]}', "{}", '{"a": []}', '{"a":[1e400]}']
)
def test_bad_assign_is_named(assign: str) -> None:
    raises_naming("assign", {"bootstrap.servers": BOOTSTRAP, "assign": assign})


@pytest.mark.parametrize(
    "offsets",
    [
        "first",
        "{not json",
        "[1, 2]",
        "23",
        "null",
        '{"t": 5}',
        '{"t": {"x": 1}}',
        '{"t": {"0": null}}',
        '{"t": {"0": NaN}}',
        '{"t": {"0": Infinity}}',
        '{"t": {"0": 1e400}}',
        '{"t": {"0": -3}}',
        '{"t": {"-1": 0}}',
    ],
)
@pytest.mark.parametrize("batch", [True, False])
def test_bad_starting_offsets_are_named(offsets: str, batch: bool) -> None:
    raises_naming("startingOffsets", {**BASE, "startingOffsets": offsets}, batch=batch)


@pytest.mark.parametrize("offsets", ["first", '{"t": {"0": Infinity}}', '{"t": {"0": -3}}'])
def test_bad_ending_offsets_are_named(offsets: str) -> None:
    raises_naming("endingOffsets", {**BASE, "endingOffsets": offsets}, batch=True)


@pytest.mark.parametrize("ending", ["latest", "earliest", '{"orders": {"0": 5}}'])
def test_ending_offsets_refused_on_a_stream(ending: str) -> None:
    message = raises_naming("endingOffsets", {**BASE, "endingOffsets": ending}, batch=False)
    assert "batch" in message


@pytest.mark.parametrize("ending", ["earliest", " Earliest ", '{"orders": {"0": 5, "1": -2}}'])
def test_ending_offsets_cannot_be_earliest(ending: str) -> None:
    message = raises_naming("endingOffsets", {**BASE, "endingOffsets": ending}, batch=True)
    assert "earliest" in message


@pytest.mark.parametrize("key", ["failOnDataLoss", "includeHeaders"])
@pytest.mark.parametrize("value", ["yes", "1", "", "truee"])
def test_bad_booleans_are_named(key: str, value: str) -> None:
    message = raises_naming(key, {**BASE, key: value})
    assert repr(value) in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxOffsetsPerTrigger", "ten"),
        ("maxOffsetsPerTrigger", "0"),
        ("maxOffsetsPerTrigger", "1.5"),
        ("minPartitions", "0"),
        ("minPartitions", "-4"),
        ("minPartitions", ""),
        ("startingTimestamp", "-1"),
        ("startingTimestamp", "yesterday"),
    ],
)
def test_bad_integers_are_named(key: str, value: str) -> None:
    raises_naming(key, {**BASE, key: value})


def test_integer_lower_bounds_are_accepted() -> None:
    options = parse(maxOffsetsPerTrigger="1", minPartitions="1", startingTimestamp="0")
    assert (options.max_offsets_per_trigger, options.min_partitions) == (1, 1)
    assert options.starting_timestamp == 0


@pytest.mark.parametrize("batch", [True, False])
def test_path_is_refused(batch: bool) -> None:
    raises_naming("path", {**BASE, "path": "orders"}, batch=batch)


# --- parse_offsets on its own ---


@pytest.mark.parametrize(("text", "spec"), [("earliest", "earliest"), (" LATEST ", "latest")])
def test_parse_offsets_words(text: str, spec: str) -> None:
    assert parse_offsets(text, option="startingOffsets") == spec


def test_parse_offsets_json_keeps_every_topic_and_partition() -> None:
    text = '{"a": {"0": 0, "3": -1}, "b": {"1": -2}, "c": {}}'
    assert parse_offsets(text, option="startingOffsets") == {
        "a": {0: 0, 3: LATEST},
        "b": {1: EARLIEST},
        "c": {},
    }


def test_parse_offsets_error_names_the_option_it_is_told() -> None:
    with pytest.raises(OptionError, match=r"^endingOffsets must be"):
        parse_offsets("soon", option="endingOffsets")
    with pytest.raises(OptionError, match="endingOffsets: bad offset -5 for t-0"):
        parse_offsets('{"t": {"0": -5}}', option="endingOffsets")
