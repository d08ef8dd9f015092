# Writes the inflight(1) man page from the built command's own --help texts,
# by Debian's help2man, so that it can never differ from what --help says.
# Run at build time by `cmake -P` (apps/CMakeLists.txt) with INFLIGHT (the
# built binary), HELP2MAN, VERSION and OUT (the page).
# The commands are the leaves of the CLI tree, as `inflight completion bash`
# lists them (`["inflight runs list"]=""`: no subcommands): a new command gets
# its section without anyone editing this file. `help` is --help itself.
execute_process(COMMAND ${INFLIGHT} completion bash OUTPUT_VARIABLE completion RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "inflight completion bash exited ${rc}")
endif()
string(FIND "${completion}" "local -A commands=(" start)
string(FIND "${completion}" "local -A flags=(" end)
if(start EQUAL -1 OR end LESS start)
  message(FATAL_ERROR "inflight completion bash has no commands table")
endif()
math(EXPR length "${end} - ${start}")
string(SUBSTRING "${completion}" ${start} ${length} table)
string(REGEX MATCHALL "\\[\"inflight [a-z0-9 -]+\"\\]=\"\"" leaves "${table}")
set(commands "")
foreach(leaf IN LISTS leaves)
  string(REGEX REPLACE "^\\[\"inflight ([a-z0-9 -]+)\"\\].*" "\\1" command "${leaf}")
  if(NOT command STREQUAL "help")
    list(APPEND commands "${command}")
  endif()
endforeach()
list(LENGTH commands count)
if(count LESS 5)
  message(FATAL_ERROR "inflight completion bash named ${count} commands: ${commands}")
endif()
set(include "[COMMANDS]\n")
foreach(command IN LISTS commands)
  separate_arguments(words UNIX_COMMAND "${command}")
  execute_process(COMMAND ${INFLIGHT} ${words} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "inflight ${command} --help exited ${rc}")
  endif()
  # roff: a backslash starts an escape; a line is never a request here.
  string(REPLACE "\\" "\\e" help "${help}")
  string(APPEND include ".SS \"inflight ${command}\"\n.nf\n${help}.fi\n")
endforeach()
file(WRITE ${OUT}.include "${include}")
execute_process(
  COMMAND ${HELP2MAN} --no-info --section 1 --version-string ${VERSION}
          --name "keeps LLM eval runs alive across pod restarts" --include ${OUT}.include
          --output ${OUT} ${INFLIGHT}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man exited ${rc}")
endif()
