"""Where the lab reads and writes, and how this invocation runs (quick or full, repetitions)."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Context:
    root: Path  # the repository
    prefix: Path  # where corio is installed (its lib/cmake/corio holds corio-config.cmake)
    quick: bool
    reps: int

    @property
    def build_dir(self) -> Path:
        return self.root / "build" / "bench"

    @property
    def go_dir(self) -> Path:
        return self.build_dir / "go"

    @property
    def rust_dir(self) -> Path:
        return self.build_dir / "rust"  # CARGO_TARGET_DIR

    @property
    def kotlin_dir(self) -> Path:
        return self.build_dir / "kotlin"  # Maven's build directory (-Dlab.build.dir)

    @property
    def results_dir(self) -> Path:
        return self.quick_dir / "results" if self.quick else self.root / "results"

    @property
    def published_dir(self) -> Path:
        """The results the report is rendered from: every experiment's latest full run, kept beside the
        report so that a run of some experiments keeps the others' sections. A quick run's are its own."""
        return self.results_dir if self.quick else self.docs_dir / "data"

    @property
    def docs_dir(self) -> Path:
        # Only a full run may replace the published report; a quick (smoke) run reports under build/.
        return self.quick_dir / "docs" if self.quick else self.root / "docs" / "bench"

    @property
    def quick_dir(self) -> Path:
        return self.root / "build" / "lab-quick"

    def cpp_binary(self, name: str) -> str:
        return str(self.build_dir / name)

    def go_binary(self, name: str) -> str:
        return str(self.go_dir / name)

    def rust_binary(self, name: str) -> str:
        return str(self.rust_dir / "release" / name)

    def kotlin_jar(self, name: str) -> str:
        return str(self.kotlin_dir / f"{name}-jar-with-dependencies.jar")
