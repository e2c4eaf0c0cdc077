@rem What every ONNX Runtime build in this recipe shares on Windows, written once: called by
@rem build_ep_cuda.bat, build_cpp.bat and build_python.bat. It defines ORT_COMMON_CMAKE_ARGS and runs
@rem nothing. cmake_common.sh is its unix counterpart.

@rem upstream's warning set tracks upstream's CI compilers, not conda-forge's
set "ORT_COMMON_CMAKE_ARGS=--compile-no-warning-as-error"
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -DCMAKE_BUILD_TYPE=Release"
@rem one standard for ORT and the dependencies it vendors: abseil picks ABI-relevant types per standard
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -DCMAKE_CXX_STANDARD=20"
@rem the generated flatbuffers headers ship in the source; flatc would only regenerate them
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -DFLATBUFFERS_BUILD_FLATC=OFF"
@rem no usage reports to Microsoft
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -Donnxruntime_USE_TELEMETRY=OFF"
@rem ORT turns RTTI off unless Python or CUDA is built; every output keeps it, as conda-forge's builds always had
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -Donnxruntime_DISABLE_RTTI=OFF"
@rem ORT asks find_package(Protobuf) before fetching the 3.21 its cmake/deps.txt pins (FIND_PACKAGE_ARGS
@rem in cmake/external/onnxruntime_external_deps.cmake), and find_package also searches the parent of
@rem every PATH entry ending in bin, here the build and host environments' Library: a conda-forge
@rem libprotobuf there, of whatever version, would be linked instead (conda-forge/onnxruntime-feedstock#57)
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON"
@rem conda-forge links the DLL runtime (/MD), as ORT does by default (CMP0091); protobuf 21.12 alone
@rem defaults a static build to the static one (protobuf_MSVC_STATIC_RUNTIME in its CMakeLists.txt).
@rem ONNX_USE_MSVC_STATIC_RUNTIME and ABSL_MSVC_STATIC_RUNTIME are not set: onnx 1.22.0 and abseil
@rem 20250814.0, the versions ORT's cmake/deps.txt fetches, already default them to OFF.
set "ORT_COMMON_CMAKE_ARGS=%ORT_COMMON_CMAKE_ARGS% -Dprotobuf_MSVC_STATIC_RUNTIME=OFF"
