# shellcheck shell=bash disable=SC2154  # target_platform comes from rattler-build
# What every ONNX Runtime build in this recipe shares, written once: sourced by
# build_cpp.sh and build_python.sh. It appends to LDFLAGS on linux and defines the array
# `ort_common_cmake_args`, with the arm64 and macOS options where they apply, and the function
# `stop_here_if_rehearsed`; it runs nothing. cmake_common.bat is its Windows counterpart.

if [[ "${target_platform}" == linux-* ]]; then
    # A library that asks for an executable stack cannot be dlopened on hardened or newer-glibc
    # systems (conda-forge/ctng-compiler-activation-feedstock#143; conda-forge's onnxruntime sets it too)
    export LDFLAGS="${LDFLAGS:-} -Wl,-z,noexecstack"
fi

# shellcheck disable=SC2034  # used by the scripts that source this file
ort_common_cmake_args=(
    # upstream's warning set tracks upstream's CI compilers, not conda-forge's newer ones
    --compile-no-warning-as-error
    -DCMAKE_BUILD_TYPE=Release
    # one standard for ORT and the dependencies it vendors: abseil picks ABI-relevant types per standard
    -DCMAKE_CXX_STANDARD=20
    # the generated flatbuffers headers ship in the source; flatc would only regenerate them
    -DFLATBUFFERS_BUILD_FLATC=OFF
    # no usage reports to Microsoft; ON also fetches the 1DS SDK and a static curl on unix
    -Donnxruntime_USE_TELEMETRY=OFF
    # ORT turns RTTI off unless Python or CUDA is built; every output keeps it, as conda-forge's builds always had
    -Donnxruntime_DISABLE_RTTI=OFF
    # the build machine's protoc (conda-forge's libprotobuf 3.21, the version ORT vendors): ORT then
    # skips building protoc, and a cross build gets one it can run
    -DONNX_CUSTOM_PROTOC_EXECUTABLE="${BUILD_PREFIX}/bin/protoc"
)

if [[ "${target_platform}" == linux-aarch64 || "${target_platform}" == osx-arm64 ]]; then
    # Arm's KleidiAI kernels in MLAS: upstream's build.py passes this for every build unless
    # --no_kleidiai (tools/ci_build/build.py), and ORT's CMake turns it off on other CPUs
    ort_common_cmake_args+=(-Donnxruntime_USE_KLEIDIAI=ON)
fi

if [[ "${target_platform}" == osx-arm64 ]]; then
    # the CoreML EP, built into the core as in upstream's macOS wheels; its macOS 13+ code paths are
    # checked at run time, so the SDK may be newer than the deployment target (config/feedstock.yaml)
    ort_common_cmake_args+=(-Donnxruntime_USE_COREML=ON)
fi

if [[ "${CONDA_BUILD_CROSS_COMPILATION:-0}" == 1 && "${target_platform}" == linux-* ]]; then
    # glibc has iconv built in, but FindIconv cannot try-compile that check when cross-compiling and
    # picks the build machine's libiconv instead
    ort_common_cmake_args+=(-DIconv_IS_BUILT_IN=TRUE)
fi

# scripts/rehearse.py runs a build script up to its build step and records the build graph of that
# step's targets instead of building them: given REHEARSAL_TARGETS_FILE, a script that reaches its
# build step writes the targets there and stops
stop_here_if_rehearsed() {
    if [[ -n "${REHEARSAL_TARGETS_FILE:-}" ]]; then
        printf '%s\n' "$@" > "${REHEARSAL_TARGETS_FILE}"
        exit 0
    fi
}
