# Embeds the status page (src/http/status_page.html, docs/serve.md "Status page") in
# the library. Run at build time with `cmake -P`, whenever the page changes:
# it writes a .cpp holding the page as a raw string and the CSP source of its
# one inline <style> and one inline <script> ('sha256-<base64>'), so that the
# page's Content-Security-Policy lets those two run and nothing else.
#   cmake -DINPUT=page.html -DTEMPLATE=status_page_html.cpp.in -DOUTPUT=out.cpp -P this
cmake_minimum_required(VERSION 3.25)

# The base64 of the bytes that `hex` spells.
function(base64_of_hex hex out)
  set(alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  string(LENGTH "${hex}" length)
  set(result "")
  set(pos 0)
  while(pos LESS length)
    string(SUBSTRING "${hex}" ${pos} 6 chunk)  # 3 bytes, or the 1 or 2 left
    string(LENGTH "${chunk}" digits)
    string(SUBSTRING "${chunk}000000" 0 6 padded)
    math(EXPR bits "0x${padded}")
    math(EXPR chars "${digits} / 2 + 1")
    set(taken 0)
    foreach(shift 18 12 6 0)
      if(taken LESS chars)
        math(EXPR index "(${bits} >> ${shift}) & 63")
        string(SUBSTRING "${alphabet}" ${index} 1 char)
        string(APPEND result "${char}")
      else()
        string(APPEND result "=")
      endif()
      math(EXPR taken "${taken} + 1")
    endforeach()
    math(EXPR pos "${pos} + 6")
  endwhile()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The CSP hash source of the text between `open` and `close`, which must
# occur once each in `html`.
function(csp_hash html open close out)
  string(FIND "${html}" "${open}" start)
  string(FIND "${html}" "${open}" last REVERSE)
  string(FIND "${html}" "${close}" end)
  string(FIND "${html}" "${close}" last_end REVERSE)
  if(start EQUAL -1 OR NOT start EQUAL last OR end EQUAL -1 OR NOT end EQUAL last_end)
    message(FATAL_ERROR "${INPUT}: needs exactly one ${open} and one ${close}")
  endif()
  string(LENGTH "${open}" open_length)
  math(EXPR start "${start} + ${open_length}")
  math(EXPR length "${end} - ${start}")
  string(SUBSTRING "${html}" ${start} ${length} body)
  string(SHA256 digest "${body}")
  base64_of_hex(${digest} base64)
  set(${out} "'sha256-${base64}'" PARENT_SCOPE)
endfunction()

file(READ "${INPUT}" STATUS_PAGE_HTML)
string(FIND "${STATUS_PAGE_HTML}" ")inflight_html\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT}: holds the raw string's delimiter )inflight_html\"")
endif()
csp_hash("${STATUS_PAGE_HTML}" "<style>" "</style>" STATUS_PAGE_STYLE_HASH)
csp_hash("${STATUS_PAGE_HTML}" "<script>" "</script>" STATUS_PAGE_SCRIPT_HASH)
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
