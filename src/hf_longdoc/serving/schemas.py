"""The requests and answers of the server, validated by pydantic: `/predict` in text embeddings inference's shape
(so a TEI client works unchanged), `/classify` in this package's richer one."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """A request: an unknown field is refused (422), never ignored."""

    model_config = ConfigDict(extra="forbid")


class PredictRequest(Strict):
    """TEI's `/predict` request. `inputs`: one document, a list of documents, or TEI's batch of one-string lists
    (`[["a"], ["b"]]`); a sequence pair (`[["a", "b"]]`) is refused, since these models read one document. TEI reads a
    flat list of exactly two strings as a pair; here every flat list is a batch of documents."""

    inputs: str | list[str] | list[list[str]]
    raw_scores: bool = False  # the logits instead of the probabilities
    truncate: bool = False  # accepted as TEI does; how a long document is read is the server's `--long`
    truncation_direction: Literal["right", "left", "Right", "Left"] = "right"


class Prediction(BaseModel):
    label: str
    score: float


class ClassifyRequest(Strict):
    """`/classify`: one document or a list of them; `explain`: the K passages that weighed most in each decision."""

    inputs: str | list[str]
    explain: int | None = Field(default=None, ge=1)
    top_k: int | None = Field(default=None, ge=1)


class Coverage(BaseModel):
    """How much of the document the model read: its text's ids (special tokens and the [PAD] fill of a sentence
    layout excluded), how many of them were read,
    whether it was cut, and the chunks it was read in (1 unless the server reads `--long chunks`)."""

    document_ids: int
    ids_read: int
    cut: bool
    chunks: int


class Passage(BaseModel):
    """A passage that weighed in the decision: `text == document[start:end]`, the offsets counting Unicode code points
    (Python's indices; JavaScript and Java count UTF-16 units, which differ after a character outside the BMP)."""

    text: str
    start: int
    end: int
    weight: float


class Classification(BaseModel):
    label: str | list[str]
    score: float | list[float]
    scores: dict[str, float]
    coverage: Coverage
    evidence: list[Passage] | None = None


class ErrorResponse(BaseModel):
    """Every error: a message naming the field or the limit, and TEI's error type."""

    error: str
    error_type: Literal["validation", "overloaded", "unauthorized", "payload_too_large", "backend", "unhealthy"]


__all__ = ["Classification", "ClassifyRequest", "Coverage", "ErrorResponse", "Passage", "PredictRequest",
           "Prediction"]
