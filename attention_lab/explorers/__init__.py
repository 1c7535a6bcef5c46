"""Explorers: controls beside an attention picture, drawn by one engine wherever a chapter is read.

One class per chapter; the chapters call them by the lower-case names:

======================  =======  =====================================================================
name                    chapter  what the controls change
======================  =======  =====================================================================
``average_explorer``    1        T -> the normalized ``tril`` average (rows of 1/(t+1))
``scores_explorer``     2        d_k, T -> the raw q·k scores of the chapter's own sequence
``scaling_explorer``    3        d_k, scaling on/off -> softmax weights of unit-variance q and k (the
                                 setting of the variance argument), Var(q·k) against d_k
``masking_explorer``    4        T, mask on/off -> the weights of the chapter's own queries and keys
``head_explorer``       5        d_k, T, seed, text -> the weights of one causal head (the chapter's,
                                 the reference head, or the learner's own ``Head``)
``trained_explorer``    6        a line of the play or typed text, trained/untrained -> the weights of
                                 chapter 6's head, before and after training
``heads_explorer``      7        a line of the play or typed text, a head removed -> the weights of the
                                 four heads of chapter 7's model, and its likeliest next characters
``generate_explorer``   8        a prompt, a number of decode steps -> the text chapter 7's model
                                 writes, and each head's weights over its cache, the newest query last
======================  =======  =====================================================================

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
