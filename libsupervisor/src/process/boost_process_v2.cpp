// Boost.Process v2 is compiled once, here, instead of in every file that
// includes it (BOOST_PROCESS_V2_SEPARATE_COMPILATION).
#include <boost/process/v2/src.hpp>
