"""Explorers: controls beside an attention picture, drawn by one engine wherever a chapter is read.

One class per chapter, each in its own module, whose docstring says what its controls change; the chapters
call them by the lower-case names: ``average_explorer`` (chapter 1), ``scores_explorer`` (2),
``scaling_explorer`` (3), ``masking_explorer`` (4), ``head_explorer`` (5), ``trained_explorer`` (6),
``heads_explorer`` (7) and ``generate_explorer`` (8).

In code: ``ex.values``, ``ex.set(T=5)`` (as the reader would; returns "" or the message), ``ex.matrix``,
``ex.result``, ``ex.shown`` (the caption), ``ex.message`` ("" when all is well). How an explorer is drawn,
computed and tested: CONTRIBUTING.md, "The explorers".
"""

from attention_lab.explorers.average import AverageExplorer
from attention_lab.explorers.base import PAGE_KEY, BadInput, Explorer, head_weights
from attention_lab.explorers.head import HeadExplorer
from attention_lab.explorers.generate import GenerateExplorer
from attention_lab.explorers.heads import HeadsExplorer
from attention_lab.explorers.learner import HANG_NOTE, HEAD_TIME_LIMIT_S, can_stop_a_hang
from attention_lab.explorers.masking import MaskingExplorer
from attention_lab.explorers.scaling import ScalingExplorer
from attention_lab.explorers.scores import ScoresExplorer
from attention_lab.explorers.trained import TrainedExplorer

# the names the chapters call
average_explorer = AverageExplorer
scores_explorer = ScoresExplorer
scaling_explorer = ScalingExplorer
masking_explorer = MaskingExplorer
head_explorer = HeadExplorer
trained_explorer = TrainedExplorer
heads_explorer = HeadsExplorer
generate_explorer = GenerateExplorer

__all__ = [
    "PAGE_KEY", "HANG_NOTE", "HEAD_TIME_LIMIT_S", "BadInput", "Explorer", "AverageExplorer", "ScoresExplorer",
    "ScalingExplorer", "MaskingExplorer", "HeadExplorer", "TrainedExplorer", "HeadsExplorer",
    "GenerateExplorer",
    "average_explorer", "scores_explorer", "scaling_explorer", "masking_explorer", "head_explorer",
    "trained_explorer", "heads_explorer", "generate_explorer", "can_stop_a_hang", "head_weights",
]
