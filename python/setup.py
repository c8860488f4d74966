"""Builds ardma._ardma with CMake (python/CMakeLists.txt); pyproject.toml holds the metadata.

Environment: ARDMA_CMAKE_ARGS, extra CMake arguments ("-DCMAKE_PREFIX_PATH=/opt/ardma" for a
toolkit installed there; "-DARDMA_PYTHON_USE_TREE=ON" to build the source tree's libraries even
if a toolkit is installed); CMAKE_BUILD_PARALLEL_LEVEL, the build's jobs.
"""

import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        source = pathlib.Path(__file__).resolve().parent
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        args = ["-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}"]
        if shutil.which("ccache"):
            args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("ARDMA_CMAKE_ARGS", ""))
        subprocess.run(["cmake", *args], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build), "--target", "ardma_python", "-j", jobs],
                       check=True)
        built = next((build / "ardma").glob("_ardma*.so"))
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


setup(ext_modules=[CMakeExtension("ardma._ardma")], cmdclass={"build_ext": CMakeBuild})
