"""The manifests of an Iceberg snapshot markerstore commits, merged in tiers.

Every commit writes one manifest of its files; left alone, a table of many small commits
has one manifest per commit, each opened by every reader and every later commit.
Iceberg's Java library and pyiceberg merge them (``commit.manifest-merge.enabled``) once
``commit.manifest.min-count-to-merge`` of them are in one bin of
``commit.manifest.target-size-bytes`` (8 MB): a bin that holds the table's one large
manifest with the new small ones, so each merge rewrites every file of the table, and a
table of small commits pays O(its files) every few commits.

Here a manifest's tier is the number of live files it lists, in powers of the min count
(16: tier 0 lists fewer than 16, tier 1 fewer than 256, ...). Once a tier holds the min
count of manifests they are merged into one of the next tier (as a log-structured merge
tree merges its runs). So a file is rewritten once per tier it climbs, at most
log16(files) times, a commit's merge rewrites 16^k files every 16^k commits (O(log
files) a commit, amortised), and a snapshot has at most 15 manifests a tier. A manifest
of the target size or more is never merged. Deleted entries are dropped by the merge that
rewrites their manifest, as pyiceberg's merge drops them.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable

from pyiceberg.manifest import ManifestContent, ManifestFile
from pyiceberg.table import TableProperties
from pyiceberg.table.update.snapshot import (
    _ManifestMergeManager,
    _MergeAppendFiles,
    _SnapshotProducer,
)
from pyiceberg.utils.properties import property_as_bool, property_as_int


def tier(manifest: ManifestFile, base: int) -> int:
    """The tier of a manifest: k where it lists fewer than ``base ** (k + 1)`` live files
    (added and existing; fewer than `base`: tier 0)."""
    files = (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)
    level, bound = 0, base
    while files >= bound:
        level, bound = level + 1, bound * base
    return level


def merge_in_tiers(producer: _SnapshotProducer, manifests: list[ManifestFile]
                   ) -> list[ManifestFile]:
    """The data manifests of a new snapshot (`manifests`: its own first, then the kept
    ones), merged in tiers as the table's properties ask; delete manifests as they are."""
    properties = producer._transaction.table_metadata.properties
    if not property_as_bool(properties, TableProperties.MANIFEST_MERGE_ENABLED,
                            TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT):
        return manifests
    base = max(2, property_as_int(properties, TableProperties.MANIFEST_MIN_MERGE_COUNT,
                                  TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT) or 2)
    target = property_as_int(properties, TableProperties.MANIFEST_TARGET_SIZE_BYTES,
                             TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT) or 0
    merger = _ManifestMergeManager(target, base, True, producer)
    by_spec: dict[int, list[ManifestFile]] = defaultdict(list)
    deletes = []
    for manifest in manifests:
        if manifest.content == ManifestContent.DATA:
            by_spec[manifest.partition_spec_id].append(manifest)
        else:
            deletes.append(manifest)
    merged = [m for spec_id, group in by_spec.items()
              for m in _merge_group(group, base, target,
                                    functools.partial(merger._create_manifest, spec_id))]
    return merged + deletes


def _merge_group(manifests: list[ManifestFile], base: int, target: int,
                 create: Callable[[list[ManifestFile]], ManifestFile]) -> list[ManifestFile]:
    """One partition spec's manifests, each tier that holds `base` of them merged into one
    of a higher tier, lowest first (a merge can fill the next tier)."""
    tiers: dict[int, list[ManifestFile]] = defaultdict(list)
    result = []
    for manifest in manifests:
        if target and manifest.manifest_length >= target:
            result.append(manifest)  # full: never merged
        else:
            tiers[tier(manifest, base)].append(manifest)
    while tiers:
        level = min(tiers)
        members = tiers.pop(level)
        if len(members) < base:
            result.extend(members)
            continue
        merged = create(members)
        tiers[max(tier(merged, base), level + 1)].append(merged)
    return result


class TieredAppend(_MergeAppendFiles):
    """pyiceberg's merging append, its manifests merged in tiers (:func:`merge_in_tiers`)."""

    def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
        return merge_in_tiers(self, manifests)
