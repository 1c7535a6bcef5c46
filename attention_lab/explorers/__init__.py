"""Explorers: widgets that redraw an attention picture as the reader moves a control.

One class per chapter, each a ``ipywidgets.VBox`` that displays nothing until the notebook shows it;
the chapters call them by the lower-case names:

======================  =======  =====================================================================
name                    chapter  what the controls change
======================  =======  =====================================================================
``average_explorer``    1        T -> the normalized ``tril`` average (rows of 1/(t+1))
``scores_explorer``     2        d_k, T -> the raw q·k scores of the chapter's own sequence
``scaling_explorer``    3        d_k, scaling on/off -> softmax weights of unit-variance q and k (the
                                 setting of the variance argument), Var(q·k) against d_k
``masking_explorer``    4        T, mask on/off -> the weights of the chapter's own q and k
``head_explorer``       5        d_k, T, seed, text -> the weights of one causal head (the chapter's,
                                 the reference head, or the learner's own ``Head``)
``trained_explorer``    6        a line of the play or typed text, trained/untrained -> the weights of
                                 chapter 6's head, before and after training
======================  =======  =====================================================================

Every explorer has ``controls`` (the live controls by name), ``image`` (the live picture),
``caption`` (the line under it: "Showing: " and what the picture shows), ``matrix`` (the array last
drawn), ``result`` (everything the last drawing computed), ``message`` (the text in the message area,
"" when all is well), ``renders`` (pictures drawn so far) and ``update_now()``. A live toggle marks its
selected button with a check icon, for JupyterLab and Colab, where the book's CSS is absent.

*Drawing.* Each explorer owns one matplotlib figure and a :class:`attention_lab.plots.Frame`, which
redraws only what changes (the heatmap's cells painted with numpy, the pixels matplotlib would draw) and
returns the picture at twice its displayed pixels. ``course/bench/keypress.py`` (``make bench-keypress``) times a keypress in
JupyterLab to the new picture on screen.

*In JupyterLab* (ipywidgets 8, anywidget installed, not Colab, not executing for the book) an explorer
shows the hosted book's page explorer instead of its core widgets: ``view`` is a
:mod:`~attention_lab.explorers.view` widget that runs the book's engine in the browser, so a press
repaints with no kernel round trip. The view then sends its values to the kernel, which sets
``controls`` and computes ``matrix``, ``result`` and ``caption`` as before (``image`` is no longer
redrawn there); a control set from code repaints the view. Elsewhere ``view`` is None and the core
widgets draw as below.

*No backlog.* ipykernel hands a dragged slider's messages to the event loop one per turn, so drawing
on every change queues a picture per intermediate value (measured: 40 drag messages, 40 pictures,
1.4 to 1.9 s behind the slider). A change after a pause is drawn at once; changes within
``REDRAW_INTERVAL_S`` of the last picture book one render with ``loop.call_later``, which reads the
controls' latest values when it runs. Only inside an IPython kernel, on its running loop
(:func:`redraw_loop`): anywhere else (a script, a unit test, beside another asyncio loop such as
Playwright's) a change is drawn synchronously. ``python -m course bench-explorers --burst`` plays such a drag
against a real kernel.

*Alive with no kernel.* When a chapter is executed for the book (``make outputs`` sets the environment
variable ``ATTENTION_LAB_STATIC=1``; ``static=True`` asks for it anywhere), on ipywidgets >= 8 an
explorer also records :meth:`Explorer.page_config` (which explorer, the values it starts on, the
chapter's own tensors as base64 float32) in its output's metadata under ``PAGE_KEY``. The book's
``book/_ext/page_explorers.py`` swaps that output for a ``<div class="attention-explorer">``, and
``book/_static/engine/explorers.js`` computes every picture in the page, at any value the live
controls take, with no Python. The cell's text/plain and widget view stay what they are in a kernel.

*Bad input* (a value out of range, T above the block size, characters outside the vocabulary, a
learner's ``Head`` that raises, returns the wrong shape or runs too long) is explained in the
explorer's message area; the previous picture stays and nothing is raised into the kernel. A value set
on a control from code that the control cannot take (``controls["T"].value = "8"``, an option a menu
does not offer) is refused: the message area says why, and so does the ``TraitError`` the assignment
raises. Arguments given to a class are checked up front with ``ValueError``, except a learner's
``Head`` that fails: that is a message, also with ``static=True`` (the explorer is then live only).

*A learner's Head that never returns.* On Linux and macOS, in the kernel's main thread, the
explorer stops its ``Head(...)`` and ``forward`` calls after ``HEAD_TIME_LIMIT_S`` (``SIGALRM``) and
says so; elsewhere (Windows, another thread) nothing can stop them: interrupt the kernel (Kernel ▸
Interrupt), as the messages about a failing ``Head`` there say.

*Where the code is.* One module per chapter's explorer (``average``, ``scores``, ``scaling``, ``masking``,
``head``, ``trained``), each a subclass of :class:`~attention_lab.explorers.base.Explorer` in ``base``,
which also holds the redraw scheduling and the page config; ``learner`` runs and checks a learner's
``Head`` for chapter 5; ``view`` is JupyterLab's page view. Every name the chapters and tests use is
importable from here.
"""

from attention_lab.explorers.average import AverageExplorer
from attention_lab.explorers.base import (C, PAGE_KEY, POWERS_OF_TWO, REDRAW_INTERVAL_S, STATIC_ENV, BadInput,
                                          Explorer, _projections, _text_ids, entropy_bits, floats, has_stack,
                                          head_weights, in_kernel, redraw_loop)
from attention_lab.explorers.head import HeadExplorer
from attention_lab.explorers.learner import (HANG_NOTE, HEAD_TIME_LIMIT_S, _build_modules, _checked_weights,
                                             can_stop_a_hang)
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

__all__ = [
    "C", "PAGE_KEY", "POWERS_OF_TWO", "REDRAW_INTERVAL_S", "STATIC_ENV", "HANG_NOTE", "HEAD_TIME_LIMIT_S",
    "BadInput", "Explorer", "AverageExplorer", "ScoresExplorer", "ScalingExplorer", "MaskingExplorer",
    "HeadExplorer", "TrainedExplorer", "average_explorer", "scores_explorer", "scaling_explorer",
    "masking_explorer", "head_explorer", "trained_explorer", "can_stop_a_hang", "entropy_bits", "floats",
    "has_stack", "head_weights", "in_kernel", "redraw_loop",
]
