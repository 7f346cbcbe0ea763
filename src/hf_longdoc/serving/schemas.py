"""The requests and answers of the server, validated by pydantic: `/predict` in text embeddings inference's shape
(TEI's `router/src/http/types.rs`, so a TEI client works unchanged), `/classify` in this package's richer one."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# TEI's `TruncationDirection` (serde aliases): "right" keeps a document's start, "left" its end
TruncationDirection = Literal["right", "left", "Right", "Left"]
# TEI's `ErrorType`, spelled as TEI sends it (its Rust variant names: no serde rename)
ErrorType = Literal["Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"]


class Strict(BaseModel):
    """A request of this package's own: an unknown field is refused (422), never ignored."""

    model_config = ConfigDict(extra="forbid")


class Parameters(BaseModel):
    """What `huggingface_hub.InferenceClient.text_classification` sends as `parameters` (the Inference API's task
    parameters): `top_k`, the K best classes; `function_to_apply`, what turns the logits into scores (`none`: the
    logits, as `raw_scores`). Other parameters are ignored, as TEI ignores the whole field."""

    model_config = ConfigDict(extra="allow")

    top_k: int | None = Field(default=None, ge=1)
    function_to_apply: Literal["softmax", "sigmoid", "none", "SOFTMAX", "SIGMOID", "NONE"] | None = None


class PredictRequest(BaseModel):
    """TEI's `/predict` request; a field TEI does not know is ignored, as TEI ignores it (and logged once).

    `inputs`: one document, a list of documents, or TEI's batch of one-string lists (`[["a"], ["b"]]`); a sequence
    pair (`[["a", "b"]]`) is refused, since these models read one document. TEI reads a flat list of exactly two
    strings as a pair and of one string as one input; here every flat list is a batch of documents.
    `truncate`: False refuses (422) a document longer than the server reads under `--long truncate`, as TEI does; None
    (or absent): the server's `auto_truncate`. `truncation_direction`: `right` reads a cut document's start, `left`
    its end."""

    model_config = ConfigDict(extra="allow")

    inputs: str | list[str] | list[list[str]]
    raw_scores: bool = False  # the logits instead of the probabilities
    truncate: bool | None = None
    truncation_direction: TruncationDirection | None = None  # None: the server's --truncation-side
    parameters: Parameters | None = None


class Prediction(BaseModel):
    """One class of a `/predict` answer (TEI's), best first."""

    label: str
    score: float


class ClassifyRequest(Strict):
    """`/classify`: one document or a list of them; `explain`: the K passages that weighed most in each decision;
    `truncation_direction`, `truncate`: as `/predict`'s."""

    inputs: str | list[str]
    explain: int | None = Field(default=None, ge=1)
    top_k: int | None = Field(default=None, ge=1)
    truncate: bool | None = None
    truncation_direction: TruncationDirection | None = None


class Coverage(BaseModel):
    """How much of the document the model read: its text's ids (special tokens and the [PAD] fill of a sentence
    layout excluded), how many of them were read, whether it was cut, which part was read (`all`, or a cut
    document's `start`, `end`, or `start and end` for a segment LM that keeps a cut document's first and last segments,
    `keep_document_end`), and the chunks it was read in (1 unless the server reads `--long chunks`)."""

    document_ids: int
    ids_read: int
    cut: bool
    part_read: Literal["all", "start", "end", "start and end"]
    chunks: int


class Passage(BaseModel):
    """A passage that weighed in the decision: `text == document[start:end]`, the offsets counting Unicode code points
    (Python's indices; JavaScript and Java count UTF-16 units, which differ after a character outside the BMP)."""

    text: str
    start: int
    end: int
    weight: float


class Classification(BaseModel):
    """One document of a `/classify` answer: `label` and `score` are lists for a multi-label model."""

    label: str | list[str]
    score: float | list[float]
    scores: dict[str, float]
    coverage: Coverage
    evidence: list[Passage] | None = None


class Classifier(BaseModel):
    id2label: dict[str, str]
    label2id: dict[str, int]


class ModelType(BaseModel):
    classifier: Classifier


class Info(BaseModel):
    """`GET /info`: TEI's `Info` (`router/src/lib.rs`), then this package's own fields."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_id: str
    model_sha: str | None
    model_dtype: str
    served_model_name: str | None
    model_type: ModelType
    max_concurrent_requests: int
    max_input_length: int
    max_batch_tokens: int
    max_batch_requests: int | None
    max_client_batch_size: int
    auto_truncate: bool
    tokenization_workers: int
    version: str
    sha: str | None
    docker_label: str | None
    family: str
    labels: list[str]
    multi_label: bool
    threshold: float | None
    reading_length: int
    long: Literal["truncate", "chunks"]
    stride: int
    aggregation: Literal["mean", "max"]
    explainable: bool
    explain_refusal: str | None
    max_input_chars: int
    max_explain: int
    api_key_required: bool
    page: str


class ErrorResponse(BaseModel):
    """Every error: a message naming the field or the limit, and TEI's error type."""

    error: str
    error_type: ErrorType


__all__ = ["Classification", "ClassifyRequest", "Coverage", "ErrorResponse", "Info", "Parameters", "Passage",
           "PredictRequest", "Prediction"]
