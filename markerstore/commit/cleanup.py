"""After a completed instant: publish it, keep the files a replace replaced for the
retention (:mod:`markerstore.commit.retention`) and delete those whose retention has
passed, then the staging area and the plan. Job commit runs it; recovery runs it again
for a plan a completed instant left."""

from __future__ import annotations

import logging

from markerstore.commit.plan import CommitPlan, delete_plan, plan_path
from markerstore.commit.retention import expire, retain
from markerstore.commit.staging import staging_for
from markerstore.errors import CorruptTableError
from markerstore.formats import Published, publish, publishers_of
from markerstore.formats.base import TimelineView
from markerstore.table import Table

log = logging.getLogger(__name__)


def post_commit(table: Table, plan: CommitPlan) -> Published:
    """After the completed instant: publish it to the table's formats (with any instant a
    crash left unpublished, oldest first; each format on its own), then record a replace's
    replaced files as retained and delete those of replaces past the retention, then the
    staging area and the plan. Idempotent; recovery runs it again for a plan a completed
    instant left behind. A replaced file that a format's retained version still references
    stays, and so does every one of a replace a format has not published yet (with the
    plan: recovery finishes it once the format has). Returns what each format did."""
    with table.pinned_timeline():  # one listing for the publish and the expiry
        return _publish_and_expire(table, plan)


def _publish_and_expire(table: Table, plan: CommitPlan) -> Published:
    try:
        publishers = publishers_of(table)
        view = TimelineView.of(table.timeline())
        published = publish(table, publishers, view=view)
    except Exception as exc:  # the commit stands; the plan stays for recovery to retry
        log.warning("instant %s: publishing to the table formats failed (%s); its replaced "
                    "files stay until recovery publishes it", plan.instant, exc)
        staging_for(table.storage, plan.instant, plan.write_uuid, table.settings,
                    plan.staging_mode).cleanup()
        return Published()
    if published.pending and plan.replaced_files:  # a format still shows those files
        staging_for(table.storage, plan.instant, plan.write_uuid, table.settings,
                    plan.staging_mode).cleanup()
        return published
    if plan.replaced_files:
        checked_replaced_files(table, plan)
        retain(table, plan.instant)
    expire(table, publishers=publishers, view=view)  # this replace's too, with a retention of 0
    staging_for(table.storage, plan.instant, plan.write_uuid, table.settings,
                plan.staging_mode).cleanup()
    delete_plan(table.storage, plan.instant)
    return published


def checked_replaced_files(table: Table, plan: CommitPlan) -> list[str]:
    """The files a completed replace deletes, checked against what the completed commit
    itself recorded: each is among the commit's ``replaced_files``, none is one of its own
    files, and each is a file of an earlier completed commit. Anything else is a
    CorruptTableError naming the plan, and nothing is deleted."""
    where = table.storage.url(plan_path(table.storage, plan.instant))
    meta = table.commit_metadata(plan.instant)  # checked against its schema when read
    recorded = set(meta.get("replaced_files", []))
    own = {entry["path"] for entry in meta["files"]}
    earlier = {entry["path"] for instant, other in table.completed()
               if instant < plan.instant for entry in other.get("files", [])}
    for path in plan.replaced_files:
        if path in own:
            raise CorruptTableError(where, f"replaced file {path!r} is one of the files "
                                           f"commit {plan.instant} itself wrote")
        if path not in recorded:
            raise CorruptTableError(where, f"replaced file {path!r} is not among the files "
                                           f"commit {plan.instant} recorded as replaced")
        if path not in earlier:
            raise CorruptTableError(where, f"replaced file {path!r} is not a file of an "
                                           f"earlier completed commit")
    return list(plan.replaced_files)
