import pathlib
import sys

# safetensors_np, the tests' reader, lives beside the tests.
sys.path.insert(0, str(pathlib.Path(__file__).parent))
