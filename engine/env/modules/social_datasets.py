"""SocialMediaSpace's replay datasets: totals per step, every action as applied, and reshare cascades."""

from __future__ import annotations

from engine.storage.catalog import Column, DatasetSchema

__all__ = ["SOCIAL_ACTIONS", "SOCIAL_CASCADES", "SOCIAL_STATE"]

SOCIAL_STATE = DatasetSchema(
    name="social_state",
    kind="env",
    description="SocialMediaSpace totals after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="actions", type="int64", description="actions applied in this step"),
        Column(name="active_agents", type="int64", description="distinct agents who acted in this step"),
        Column(name="posts_total", type="int64", description="posts published since the start, reposts included"),
        Column(name="reposts_total", type="int64", description="reposts published since the start"),
        Column(name="comments_total", type="int64", description="comments since the start"),
        Column(name="likes_total", type="int64", description="likes currently given"),
        Column(name="follows_total", type="int64", description="follow relations currently in place"),
    ),
)
# Columns are only ever appended (with the description they were first stored with): a stored run's catalog must
# match to be resumed.
SOCIAL_ACTIONS = DatasetSchema(
    name="social_actions",
    kind="env",
    description="every post, repost, comment, like, follow and unfollow, as applied",
    columns=(
        Column(name="step", type="int64", description="step in which it was applied"),
        Column(name="t", type="timestamp", description="simulated time at which it was applied"),
        Column(name="kind", type="string", description="post | repost | comment | like | follow | unfollow"),
        Column(name="agent_id", type="int64", description="acting agent"),
        Column(name="post_id", type="int64", description="new post (post, repost) or the post acted on (comment, like)"),
        Column(name="ref_post_id", type="int64", description="the reposted original (repost)"),
        Column(name="target_agent_id", type="int64", description="followed or unfollowed agent"),
        Column(name="text", type="string", description="post, repost or comment text"),
        Column(name="parent_post_id", type="int64",
               description="repost: the post it was reposted from (the original, or a repost of it)"),
        Column(name="intervention", type="bool",
               description="made by an intervention: an edge removed or added (kind unfollow, follow), a seeded "
               "post (post) or a feed rule changed (kind feed_rule, text the rule)"),
    ),
)
SOCIAL_CASCADES = DatasetSchema(
    name="social_cascades",
    kind="env",
    description="reshare cascades: a row for each original post in the step it is published and in each step its "
    "tree grows (the latest row of a post is its cascade now)",
    columns=(
        Column(name="step", type="int64", description="step after which the tree is as given"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="root_post_id", type="int64", description="the original post"),
        Column(name="author_id", type="int64", description="its author"),
        Column(name="size", type="int64", description="posts in the tree: the original and every repost reached through it"),
        Column(name="depth", type="int64", description="the longest chain of reposts from the original"),
        Column(name="max_breadth", type="int64", description="the most posts at one depth"),
        Column(name="structural_virality", type="float64",
               description="mean distance between pairs of posts of the tree (Goel et al.); null for a lone post"),
    ),
)
