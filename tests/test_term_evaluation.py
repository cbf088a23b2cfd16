"""stszone's own nodeSelectorTerm evaluation against the reference reading of the Kubernetes API
reference (tests/test_node_selection.py), on any concrete node."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tests.test_node_selection import (
    LABEL_VALUES,
    OTHER_KEYS,
    VIEW,
    ZONE_KEY,
    ZONES,
    ref_term,
    terms,
)
from webhook.model.selection import parse_term


@given(
    labels=st.dictionaries(
        st.sampled_from([ZONE_KEY, *OTHER_KEYS]), st.sampled_from([*ZONES, *LABEL_VALUES])
    ),
    name=st.sampled_from([*VIEW, "fresh"]),
    term=terms(),
)
@example(labels={ZONE_KEY: "1"}, name="n1", term={})  # "a null or empty term matches no objects"
@example(labels={ZONE_KEY: "1"}, name="n1", term={"matchExpressions": [], "matchFields": []})
def test_property_term_evaluation_matches_the_reference(
    labels: dict[str, str], name: str, term: dict[str, Any]
) -> None:
    """Empty terms match nothing; requirements are ANDed; NotIn/DoesNotExist match a missing
    key; Gt/Lt need an integer label; matchFields compare metadata.name."""
    assert parse_term(term).matches(labels, name) == ref_term(term, (name, labels))
