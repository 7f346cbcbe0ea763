"""Every plot the package draws goes through `figure` (headless matplotlib, imported only when a plot is drawn): the
ground floor, importing nothing of the package, so `attention_map` and `experiments.report` both use it."""

from contextlib import contextmanager


@contextmanager
def figure(path, columns=1, size=(6, 4)):
    """A matplotlib figure (headless) with `columns` axes, laid out and saved to `path` as a PNG when the block ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, columns, figsize=size)
    try:
        yield axes
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def plain_log_ticks(ticks, at=None):
    """Label a log axis with plain numbers (512, 20) instead of powers: at the given values, or at 1, 2, 5 × 10^k."""
    from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, ScalarFormatter

    ticks.set_major_locator(FixedLocator(at) if at is not None else LogLocator(subs=(1, 2, 5)))
    ticks.set_major_formatter(ScalarFormatter())
    ticks.set_minor_formatter(NullFormatter())


__all__ = ["figure", "plain_log_ticks"]
