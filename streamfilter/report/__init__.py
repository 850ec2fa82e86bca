"""Campaigns in a replay's verdicts: clusters, timelines and charts (``streamfilter report``)."""

from ._clusters import Clusters
from ._html import render

__all__ = ["Clusters", "render"]
