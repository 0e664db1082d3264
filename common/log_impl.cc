// The implementation of the parts of spdlog and fmt that log.cc and VGPU_LOG
// use, compiled here once. Every other file includes their headers in
// compiled-library mode (SPDLOG_COMPILED_LIB, no FMT_HEADER_ONLY: see
// cmake/dependencies.cmake), which declares these functions without defining
// them; Debian's libspdlog/libfmt shared libraries would define them too, but
// libvgpu must not load either into an application (log.h says why).
#include <fmt/format-inl.h>
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>

#ifndef SPDLOG_COMPILED_LIB
#error "log_impl.cc defines spdlog's functions: build it with SPDLOG_COMPILED_LIB"
#endif

// The templates fmt/format.h declares `extern` outside header-only mode.
FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE

// log.cc's sink (one write(2) per line, no lock) derives from this one.
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
